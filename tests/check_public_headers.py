#!/usr/bin/env python3
"""Each public header compiles on its own, and the facade needs no CAF.

For every include/mibyan/*.hpp: compile it alone (-fsyntax-only) with only
include/ on the include path besides the system paths. For the facade
headers (all but actors.hpp, the documented actor-level API) also:
  - no `caf` identifier in the text (not even a forward declaration);
  - no file under a caf/ directory among the headers it pulls in (CAF is
    installed in a system path here, so its absence from the path is
    checked on the dependency list the compiler reports).

Usage: check_public_headers.py REPO_ROOT CXX   exit 0 clean, 1 problems.
"""
import os
import re
import subprocess
import sys
import tempfile

ACTOR_LEVEL = {"actors.hpp"}


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    root, cxx = sys.argv[1], sys.argv[2]
    inc = os.path.join(root, "include")
    headers = sorted(f for f in os.listdir(os.path.join(inc, "mibyan"))
                     if f.endswith(".hpp"))
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        for h in headers:
            path = os.path.join(inc, "mibyan", h)
            rel = "mibyan/" + h
            src = os.path.join(tmp, "tu.cpp")
            with open(src, "w") as f:
                f.write('#include "%s"\n' % rel)
            deps = os.path.join(tmp, "tu.d")
            cmd = [cxx, "-std=c++17", "-fsyntax-only", "-Wall", "-Wextra",
                   "-I", inc, "-MD", "-MF", deps, src]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                problems.append("%s does not compile alone:\n%s" % (rel, r.stderr))
                continue
            if h in ACTOR_LEVEL:
                continue
            text = open(path, encoding="utf-8").read()
            for n, line in enumerate(text.splitlines(), 1):
                if re.search(r"\bcaf\b", line):
                    problems.append("%s:%d names caf: %s" % (rel, n, line.strip()))
            dep_text = open(deps).read() if os.path.exists(deps) else ""
            for d in dep_text.replace("\\\n", " ").split():
                if "/caf/" in d:
                    problems.append("%s pulls in a CAF header: %s" % (rel, d))
                    break
            print("public header %s: ok" % rel)
    for p in problems:
        print("public headers: " + p)
    print("public headers: %d checked, %d problem(s)" % (len(headers), len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
