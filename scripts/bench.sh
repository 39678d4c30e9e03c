#!/usr/bin/env bash
# Runs the whole benchmark suite and prints one table (docs/benchmarks.md,
# "Result rows").
#
#   bash scripts/bench.sh [--quick] [--compare OLD.json] [--no-run] [--no-build]
#                         [--build-dir DIR] [--only REGEX] [--out FILE]
#
# * Configures and builds the benchmark targets in their own build directory
#   (default build-bench, RelWithDebInfo, tests off), unless --no-build.
# * Runs every command of bench/suite.txt (one shell command per line, '#'
#   comments) from that build directory, with MIBYAN_SOURCE_DIR set to the
#   source tree, after a `sync` (no writeback of an earlier command during
#   the next); with --quick, appends --quick to each command. Each
#   command's output goes to DIR/bench-logs/<n>.log.
# * Collects every stdout line "BENCH_ROW {json}" into one table (metric,
#   ours, baseline, ratio, goal, met) and writes bench-results.json
#   (or --out FILE).
# * --compare OLD.json prints old against new per metric; with --no-run it
#   compares the existing results file against OLD.json without running.
# Exit status: 0 when every command ran and exited 0, 1 otherwise (a goal
# that is not met is reported, not an error).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="$ROOT/build-bench"
QUICK=0
COMPARE=""
RUN=1
BUILD=1
ONLY=""
OUT="$ROOT/bench-results.json"

usage() { sed -n '2,21p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --compare) COMPARE="${2:?--compare needs a file}"; shift ;;
    --no-run) RUN=0 ;;
    --no-build) BUILD=0 ;;
    --build-dir) BUILD_DIR="$(realpath -m "${2:?--build-dir needs a directory}")"; shift ;;
    --only) ONLY="${2:?--only needs a regex}"; shift ;;
    --out) OUT="$(realpath -m "${2:?--out needs a file}")"; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "bench.sh: unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
  shift
done

if [[ -n "$COMPARE" && ! -f "$COMPARE" ]]; then
  echo "bench.sh: no such file: $COMPARE" >&2
  exit 2
fi
COMPARE="${COMPARE:+$(realpath "$COMPARE")}"

if ! command -v python3 >/dev/null; then
  echo "bench.sh: python3 is needed to build the table" >&2
  exit 2
fi

status=0
if [[ $RUN -eq 1 ]]; then
  if [[ $BUILD -eq 1 ]]; then
    if [[ ! -f "$BUILD_DIR/CMakeCache.txt" ]]; then
      cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DMIBYAN_BUILD_TESTS=OFF -DMIBYAN_BUILD_BENCH=ON >/dev/null \
        || { echo "bench.sh: configure failed" >&2; exit 1; }
    fi
    # The CLI and every executable declared in bench/CMakeLists.txt.
    # Only those this configuration defines: some need the test support
    # library, which a tests-off build lacks.
    defined="$(cmake --build "$BUILD_DIR" --target help 2>/dev/null)"
    targets=(mibyan)
    for t in $(sed -n 's/^[[:space:]]*add_executable(\([A-Za-z0-9_]*\).*/\1/p' \
                 "$ROOT/bench/CMakeLists.txt"); do
      grep -qE "^\.\.\. $t( |\$)" <<<"$defined" && targets+=("$t")
    done
    echo "bench.sh: building ${targets[*]} in $BUILD_DIR" >&2
    if ! nice cmake --build "$BUILD_DIR" -j"${BENCH_JOBS:-2}" --target "${targets[@]}" \
         > "$BUILD_DIR/bench-build.log" 2>&1; then
      tail -30 "$BUILD_DIR/bench-build.log" >&2
      echo "bench.sh: build failed (log: $BUILD_DIR/bench-build.log)" >&2
      exit 1
    fi
  fi
  LOGS="$BUILD_DIR/bench-logs"
  rm -rf "$LOGS"
  mkdir -p "$LOGS"
  MANIFEST="$LOGS/manifest.tsv"
  : > "$MANIFEST"
  n=0
  suite_start=$(date +%s.%N)
  while IFS= read -r line || [[ -n "$line" ]]; do
    cmd="${line%%#*}"
    cmd="$(echo "$cmd" | sed 's/^[[:space:]]*//;s/[[:space:]]*$//')"
    [[ -z "$cmd" ]] && continue
    if [[ -n "$ONLY" ]] && ! [[ "$cmd" =~ $ONLY ]]; then
      continue
    fi
    n=$((n + 1))
    [[ $QUICK -eq 1 ]] && cmd="$cmd --quick"
    log="$LOGS/$n.log"
    echo "bench.sh: [$n] $cmd" >&2
    # The previous benchmark's dirty pages (the store bench writes about a
    # gigabyte) are written back before this one starts, not during it.
    sync
    t0=$(date +%s.%N)
    (cd "$BUILD_DIR" && MIBYAN_BENCH_QUICK=$QUICK MIBYAN_SOURCE_DIR="$ROOT" \
       timeout --kill-after=10 "${BENCH_TIMEOUT:-900}" bash -c "$cmd") \
       > "$log" 2> "$LOGS/$n.err"
    rc=$?
    t1=$(date +%s.%N)
    secs=$(python3 -c "print(round($t1 - $t0, 1))")
    rows=$(grep -c '^BENCH_ROW ' "$log" || true)
    echo "bench.sh: [$n] exit $rc, ${secs} s, $rows rows" >&2
    if [[ $rc -ne 0 ]]; then
      status=1
      tail -5 "$LOGS/$n.err" | sed 's/^/    /' >&2
    fi
    printf '%s\t%s\t%s\t%s\n' "$n" "$rc" "$secs" "$cmd" >> "$MANIFEST"
  done < "$ROOT/bench/suite.txt"
  suite_secs=$(python3 -c "import time; print(round(time.time() - $suite_start, 1))")
  git_rev=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
  git_dirty=$(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null | head -1)
  python3 - "$LOGS" "$OUT" "$QUICK" "$git_rev${git_dirty:+-dirty}" "$suite_secs" <<'PY'
import json, os, sys, time, platform
logs, out, quick, rev, secs = sys.argv[1:6]
commands, rows = [], []
with open(os.path.join(logs, "manifest.tsv")) as f:
    for line in f:
        n, rc, t, cmd = line.rstrip("\n").split("\t", 3)
        commands.append({"command": cmd, "exit": int(rc), "seconds": float(t)})
        with open(os.path.join(logs, n + ".log"), errors="replace") as lf:
            for l in lf:
                if not l.startswith("BENCH_ROW "):
                    continue
                try:
                    r = json.loads(l[len("BENCH_ROW "):])
                except ValueError as e:
                    print(f"bench.sh: [{n}] bad BENCH_ROW ({e}): {l.strip()}",
                          file=sys.stderr)
                    continue
                if not isinstance(r, dict) or "metric" not in r:
                    print(f"bench.sh: [{n}] BENCH_ROW without a metric: {l.strip()}",
                          file=sys.stderr)
                    continue
                r["command"] = cmd
                rows.append(r)
try:
    load = os.getloadavg()
except OSError:
    load = None
doc = {"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
       "git": rev, "quick": quick == "1", "host": platform.node(),
       "cpus": os.cpu_count(), "loadavg": load, "seconds": float(secs),
       "commands": commands, "rows": rows}
with open(out, "w") as f:
    json.dump(doc, f, indent=1)
    f.write("\n")
PY
fi

if [[ ! -f "$OUT" ]]; then
  echo "bench.sh: no results file $OUT (run without --no-run first)" >&2
  exit 1
fi

python3 - "$OUT" "$COMPARE" <<'PY'
import json, sys
new = json.load(open(sys.argv[1]))
old = json.load(open(sys.argv[2])) if sys.argv[2] else None

def num(v, unit=""):
    if v is None:
        return "-"
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    a = abs(v)
    s = (f"{v:.0f}" if a >= 1000 else f"{v:.1f}" if a >= 100 else
         f"{v:.2f}" if a >= 1 else f"{v:.3f}" if a >= 0.01 else f"{v:.3g}")
    return s + (" " + unit if unit else "")

def ratio(r):
    v = r.get("ratio")
    return "-" if v is None else f"{v:.2f}x"

def met(v):
    return {True: "yes", False: "NO", None: "-"}.get(v, str(v))

def table(head, body):
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body)]
    line = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()
    print(line(head))
    print(line(["-" * w for w in widths]))
    for b in body:
        print(line(b))

rows = new["rows"]
print(f"\n# bench results {new['when']} git {new['git']}"
      f"{' (quick)' if new.get('quick') else ''}, {new.get('seconds', 0)} s,"
      f" load {new.get('loadavg')}")
table(["metric", "ours", "baseline", "ratio", "goal", "met"],
      [[r["metric"], num(r.get("ours"), r.get("unit", "")),
        num(r.get("baseline"), r.get("unit", "")), ratio(r),
        r.get("goal", ""), met(r.get("met"))] for r in rows])
failed = [c for c in new.get("commands", []) if c["exit"] != 0]
for c in failed:
    print(f"FAILED (exit {c['exit']}): {c['command']}")
n_met = sum(1 for r in rows if r.get("met") is True)
n_miss = sum(1 for r in rows if r.get("met") is False)
print(f"{len(rows)} rows: {n_met} goals met, {n_miss} missed, "
      f"{len(rows) - n_met - n_miss} informational")

if old is not None:
    print(f"\n# compare: old {old.get('when')} git {old.get('git')}"
          f" -> new {new['when']} git {new['git']}")
    olds = {r["metric"]: r for r in old.get("rows", [])}
    body = []
    seen = set()
    for r in rows:
        m = r["metric"]
        seen.add(m)
        o = olds.get(m)
        ov, nv = (o or {}).get("ours"), r.get("ours")
        if isinstance(ov, (int, float)) and isinstance(nv, (int, float)) and ov:
            change = f"{(nv - ov) / abs(ov) * 100:+.1f}%"
        else:
            change = "new" if o is None else "-"
        body.append([m, num(ov, r.get("unit", "")), num(nv, r.get("unit", "")),
                     change, ratio(o) if o else "-", ratio(r),
                     met(o.get("met")) if o else "-", met(r.get("met"))])
    for m, o in olds.items():
        if m not in seen:
            body.append([m, num(o.get("ours"), o.get("unit", "")), "-", "gone",
                         ratio(o), "-", met(o.get("met")), "-"])
    table(["metric", "old", "new", "change", "old ratio", "new ratio",
           "old met", "new met"], body)
PY
exit $status
