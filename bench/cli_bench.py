"""CLI benchmarks for scripts/bench.sh (docs/benchmarks.md, "Result rows").

  python3 cli_bench.py MIBYAN_BINARY [--quick]

1. One-shot `mibyan tool read_file` start to exit, with a pyenv-like shim
   directory first on PATH (a bash `python3` that does some work and sleeps
   80 ms before exec'ing the real interpreter, as pyenv's shims cost),
   against the real interpreter's `python3 -c 'print(1)'`, alternating.
2. Warm `pass` cells through `mibyan tool --stdin` (line out, result line
   in), against a Python newline-JSON echo over pipes: several rounds,
   each a fresh process of both, alternating; the rows are the medians
   of the rounds' p50 and p99.
Prints BENCH_ROW lines.
"""

import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time


def row(metric, ours, baseline, unit, goal, met):
    ratio = ours / baseline if baseline else None
    print("BENCH_ROW " + json.dumps({
        "metric": metric, "ours": ours, "baseline": baseline, "ratio": ratio,
        "unit": unit, "goal": goal, "met": met}), flush=True)


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, int(round(p * len(xs) + 0.5)) - 1))]


def timed(argv, env, cwd):
    t = time.perf_counter()
    r = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    ms = (time.perf_counter() - t) * 1000
    if r.returncode != 0:
        sys.exit("cli_bench: %s failed: %s" % (argv[0], r.stderr.decode()))
    return ms, r.stdout


def startup(mibyan, real_python, tmp, runs):
    shims = os.path.join(tmp, "shims")
    os.makedirs(shims)
    with open(os.path.join(shims, "python3"), "w") as f:
        f.write("#!/bin/bash\n"
                "# pyenv-like shim: work, then the real interpreter\n"
                "for i in $(seq 1 200); do :; done\n"
                "sleep 0.08\n"
                "exec '%s' \"$@\"\n" % real_python)
    os.chmod(os.path.join(shims, "python3"), 0o755)
    home = os.path.join(tmp, "home")
    os.makedirs(home)
    target = os.path.join(tmp, "a.txt")
    with open(target, "w") as f:
        f.write("hello\n")
    env = dict(os.environ)
    env["PATH"] = shims + ":" + env.get("PATH", "")
    env["MIBYAN_HOME"] = home
    args = [mibyan, "tool", "read_file", json.dumps({"path": target})]
    ours, base = [], []
    for i in range(runs + 2):
        a, out = timed(args, env, tmp)
        if b"hello" not in out:
            sys.exit("cli_bench: unexpected read_file output: %r" % out)
        b, _ = timed([real_python, "-c", "print(1)"], env, tmp)
        if i >= 2:
            ours.append(a)
            base.append(b)
    o, p = pct(ours, 0.5), pct(base, 0.5)
    print("one-shot read_file: %s ms" % " ".join("%.1f" % x for x in ours))
    print("python3 -c print(1): %s ms" % " ".join("%.1f" % x for x in base))
    row("cli: one-shot `mibyan tool read_file`, shims on PATH", o, p, "ms",
        "<= 0.5x the real interpreter's -c print(1)",
        o <= 0.5 * p)


def stdin_cells(mibyan, real_python, tmp, echo_script, n, rounds):
    home = os.path.join(tmp, "home-stdin")
    os.makedirs(home)
    with open(os.path.join(home, "config.yaml"), "w") as f:
        f.write("approvals:\n  unattended_mode: approve\n")
    env = dict(os.environ)
    env["MIBYAN_HOME"] = home

    def round_trips(argv, line, count, check):
        p = subprocess.Popen(argv, env=env, cwd=tmp, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, bufsize=0)
        out = p.stdout
        samples = []
        buf = b""
        # As timeit does: no garbage collection pause of this client inside
        # a timed round trip (it allocates per sample, so a collection would
        # otherwise land in every few hundredth sample, ours and the
        # baseline's alike).
        gc.disable()
        try:
            for i in range(count + 20):
                t = time.perf_counter()
                p.stdin.write(line)
                while b"\n" not in buf:
                    chunk = os.read(out.fileno(), 65536)
                    if not chunk:
                        sys.exit("cli_bench: %s ended early" % argv[0])
                    buf += chunk
                got, buf = buf.split(b"\n", 1)
                if i >= 20:
                    samples.append((time.perf_counter() - t) * 1000)
                check(got)
        finally:
            gc.enable()
        p.stdin.close()
        p.wait()
        return samples

    def ok(got):
        if b'"success"' not in got:
            sys.exit("cli_bench: warm cell failed: %r" % got)
    cell = (json.dumps({"tool": "execute_code", "args": {"code": "pass"}})
            + "\n").encode()
    # Several rounds, each a fresh process, ours and the echo alternating:
    # where the scheduler places the processes (one CPU or two) changes a
    # round's figures (docs/benchmarks.md), so one round is one sample.
    ours, echo, ours_p99, echo_p99 = [], [], [], []
    for _ in range(rounds):
        o = round_trips([mibyan, "tool", "--stdin"], cell, n, ok)
        e = round_trips([real_python, "-u", echo_script, "pipe"],
                        b'{"id":"1","code":"pass","timeout":300.0}\n', n,
                        lambda got: None)
        ours.append(pct(o, 0.5))
        ours_p99.append(pct(o, 0.99))
        echo.append(pct(e, 0.5))
        echo_p99.append(pct(e, 0.99))
    print("tool --stdin warm cell p50 per round: %s ms" %
          " ".join("%.3f" % x for x in ours))
    print("py pipe echo p50 per round: %s ms" %
          " ".join("%.3f" % x for x in echo))
    o50, e50 = pct(ours, 0.5), pct(echo, 0.5)
    o99, e99 = pct(ours_p99, 0.5), pct(echo_p99, 0.5)
    row("cli: warm `pass` cell p50 via `mibyan tool --stdin`",
        o50, e50, "ms", "< 0.08 ms", o50 < 0.08)
    row("cli: warm `pass` cell p99 via `mibyan tool --stdin`",
        o99, e99, "ms", "< 0.3 ms", o99 < 0.3)


def main(argv):
    if len(argv) < 2:
        sys.stderr.write(__doc__)
        return 2
    mibyan = os.path.abspath(argv[1])
    quick = "--quick" in argv
    real_python = sys.executable
    echo_script = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                               "echo_server.py")
    tmp = tempfile.mkdtemp(prefix="mibyan_cli_bench_")
    try:
        startup(mibyan, real_python, tmp, 6 if quick else 20)
        stdin_cells(mibyan, real_python, tmp, echo_script,
                    100 if quick else 300, 3 if quick else 7)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
