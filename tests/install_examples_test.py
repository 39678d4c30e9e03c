#!/usr/bin/env python3
"""Installs Mibyan into a temporary prefix and uses it from outside the tree.

1. cmake --install BUILD --prefix P
2. builds examples/facade_app and examples/caf_app with
   find_package(mibyan) (-DCMAKE_PREFIX_PATH=P), and facade_app once more
   with pkg-config (PKG_CONFIG_PATH=P/lib/pkgconfig) and the compiler alone;
3. runs each against the scripted provider (tests/support/http_server.py):
   the model calls the host tool `lookup_order`, the run prints its result;
4. runs the installed `mibyan` binary from another directory: execute_code
   works, so the kernel runner needs nothing from the source tree.

Usage: install_examples_test.py REPO_ROOT BUILD_DIR CXX   (exit 0 = pass)
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request

ROOT, BUILD, CXX = sys.argv[1], sys.argv[2], sys.argv[3]


def run(cmd, **kw):
    print("+ " + " ".join(cmd), flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        print(r.stdout[-4000:])
        print(r.stderr[-4000:])
        raise SystemExit("FAILED (exit %d): %s" % (r.returncode, " ".join(cmd)))
    return r.stdout


def completion(content, calls=()):
    msg = {"role": "assistant", "content": content or None}
    if calls:
        msg["tool_calls"] = [{"id": i, "type": "function",
                              "function": {"name": n, "arguments": a}}
                             for i, n, a in calls]
    return json.dumps({"id": "x", "object": "chat.completion", "model": "m",
                       "choices": [{"index": 0, "message": msg,
                                    "finish_reason": "tool_calls" if calls else "stop"}],
                       "usage": {"prompt_tokens": 1, "completion_tokens": 1,
                                 "total_tokens": 2}})


class Server:
    def __init__(self):
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(ROOT, "tests/support/http_server.py")],
            stdout=subprocess.PIPE, text=True)
        self.port = int(self.proc.stdout.readline())

    def url(self, path):
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def script(self, body):
        spec = {"path": "/v1/chat/completions", "status": 200, "body": body}
        req = urllib.request.Request(self.url("/__script"),
                                     data=json.dumps(spec).encode(),
                                     method="POST")
        urllib.request.urlopen(req).read()

    def close(self):
        self.proc.kill()
        self.proc.wait()


def check_app(server, exe, home, expect):
    # Two replies per run: the model calls the host tool, then answers.
    server.script(completion("", [("c1", "lookup_order", '{"order_id":"42"}')]))
    server.script(completion("Order 42 has shipped."))
    env = dict(os.environ, MIBYAN_HOME=home)
    for var in ("OPENAI_API_KEY", "CUSTOM_API_KEY", "MIBYAN_CONFIG"):
        env.pop(var, None)
    out = run([exe, server.url("/v1"), "m"], env=env, timeout=120)
    print(out)
    for e in expect:
        if e not in out:
            raise SystemExit("FAILED: %s output lacks %r" % (exe, e))


def main():
    tmp = tempfile.mkdtemp(prefix="mibyan-install-")
    try:
        prefix = os.path.join(tmp, "prefix")
        run(["cmake", "--install", BUILD, "--prefix", prefix])
        for f in ("bin/mibyan", "include/mibyan/mibyan.hpp",
                  "include/mibyan/actors.hpp"):
            if not os.path.exists(os.path.join(prefix, f)):
                raise SystemExit("FAILED: %s not installed" % f)
        libdirs = [d for d in ("lib", "lib64") if os.path.isdir(os.path.join(prefix, d))]
        pcdir = [os.path.join(prefix, d, "pkgconfig") for d in libdirs
                 if os.path.exists(os.path.join(prefix, d, "pkgconfig", "mibyan.pc"))]
        if not pcdir:
            raise SystemExit("FAILED: mibyan.pc not installed")
        # Private headers stay private.
        for d in ("include/actors", "include/runtime", "include/serve",
                  "include/cluster", "include/tools", "include/config"):
            if os.path.exists(os.path.join(prefix, d)):
                raise SystemExit("FAILED: private headers installed: " + d)

        launcher = []
        if shutil.which("ccache"):
            launcher = ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"]
        apps = {}
        for name in ("facade_app", "caf_app"):
            bdir = os.path.join(tmp, name)
            run(["cmake", "-S", os.path.join(ROOT, "examples", name), "-B", bdir,
                 "-DCMAKE_PREFIX_PATH=" + prefix, "-DCMAKE_BUILD_TYPE=Release",
                 "-DCMAKE_CXX_COMPILER=" + CXX] + launcher)
            run(["cmake", "--build", bdir, "-j2"])
            apps[name] = os.path.join(bdir, name)

        env = dict(os.environ, PKG_CONFIG_PATH=pcdir[0])
        flags = run(["pkg-config", "--cflags", "--libs", "mibyan"], env=env).split()
        pc_exe = os.path.join(tmp, "facade_app_pc")
        cmd = ([CXX, "-std=c++17", "-O1",
                os.path.join(ROOT, "examples/facade_app/main.cpp"), "-o", pc_exe]
               + flags)
        if shutil.which("ccache"):
            cmd = ["ccache"] + cmd
        run(cmd)

        server = Server()
        try:
            home = os.path.join(tmp, "home")
            check_app(server, apps["facade_app"], home,
                      ["[tool start] lookup_order", "shipped-by-host",
                       "final: Order 42 has shipped."])
            check_app(server, pc_exe, home,
                      ["shipped-by-host", "final: Order 42 has shipped."])
            check_app(server, apps["caf_app"], home,
                      ["tool actor: ", "shipped-by-caf-host", "[tool_end]",
                       "final: ", "Order 42 has shipped."])
        finally:
            server.close()

        # The installed binary runs execute_code from elsewhere.
        env = dict(os.environ, MIBYAN_HOME=os.path.join(tmp, "home2"))
        out = run([os.path.join(prefix, "bin/mibyan"), "tool", "execute_code",
                   '{"code":"print(6*7)"}'], env=env, cwd=tmp, timeout=120)
        if "42" not in out:
            raise SystemExit("FAILED: installed mibyan execute_code: " + out)
        print("install and examples: ok")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
