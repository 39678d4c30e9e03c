#!/usr/bin/env python3
"""Fails when a project include points up the layer order.

The order is the one written in docs/architecture.md ("Layers"); this file
holds the same table, and the test `layering_check` (tests/CMakeLists.txt)
checks that the two agree, so the document cannot drift from the check.

A file in layer N may include headers of layers <= N. Folders on the same
layer may include each other only where ALLOWED_SAME_LAYER says so (none
today): a same-layer include needs a reason written down here.

Usage: check_layers.py [REPO_ROOT]   exit 0 clean, 1 violations, 2 usage.
"""
import os
import re
import sys

# Lowest first. Each entry: layer index -> folders.
LAYERS = [
    ["messages", "base"],
    ["config", "kernels", "storage"],
    ["approvals", "cron"],
    ["tools", "providers"],
    ["agent"],
    ["actors"],
    ["runtime"],
    ["serve", "cluster", "mcp_server", "acp"],
    ["cli", "bench", "examples", "fuzz"],
]
# Subfolders, which belong to their parent's layer (a file in tools/mcp/ is
# a tools/ file). Any other subfolder of a library folder (all layers but
# the last, whose examples have a folder each) is a problem: a new one is
# written down here and in docs/architecture.md.
SUBFOLDERS = {
    "tools": {"mcp", "agent", "html"},
    "storage": {"lmdb", "postgres"},
}
# Includes between folders of one layer that are allowed, as (from, to).
ALLOWED_SAME_LAYER = set()
# Public headers (include/mibyan/) are the facade of the composition root,
# except these vocabulary headers: plain CAF-free types with no project
# include, shared by the facade and the layers below it (they sit on the
# lowest layer; the check below makes sure they include nothing of ours).
PUBLIC_VOCABULARY = {"approval.hpp", "clarify.hpp", "status.hpp", "turn.hpp"}
# Folders whose files are not part of the layered product.
IGNORED = {"tests", "build", "docs", "scripts", "cmake", ".git", ".ci"}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layer_of(folder):
    for i, names in enumerate(LAYERS):
        if folder in names:
            return i
    return None


def top_folder(path):
    """The layered folder a file (repo path) or an include path belongs to."""
    parts = path.split("/")
    if parts[0] == "include" and len(parts) > 2 and parts[1] == "mibyan":
        parts = parts[1:]
    if parts[0] == "mibyan" and len(parts) == 2:
        # Public headers, named as a user includes them: "mibyan/x.hpp".
        return LAYERS[0][0] if parts[1] in PUBLIC_VOCABULARY else "runtime"
    return parts[0]


def is_vocabulary(inc):
    """A public vocabulary header, named as included ("mibyan/turn.hpp"): it
    includes nothing of ours, so every layer may include it, base/ too."""
    parts = inc.split("/")
    return len(parts) == 2 and parts[0] == "mibyan" and parts[1] in PUBLIC_VOCABULARY


def documented_order(root):
    """The layer lines of docs/architecture.md, between the LAYERS markers."""
    path = os.path.join(root, "docs", "architecture.md")
    try:
        text = open(path, encoding="utf-8").read()
    except OSError as e:
        return None, f"cannot read {path}: {e}"
    m = re.search(r"<!-- layers:begin -->(.*?)<!-- layers:end -->", text, re.S)
    if not m:
        return None, f"{path}: no <!-- layers:begin --> ... <!-- layers:end --> block"
    layers = []
    for line in m.group(1).splitlines():
        line = line.strip()
        mm = re.match(r"^\d+\.\s+(.*)$", line)
        if mm:
            layers.append(sorted(re.findall(r"`([a-z_]+)/`", mm.group(1))))
    return layers, None


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    root = os.path.abspath(root)
    problems = []

    doc, err = documented_order(root)
    if err:
        problems.append(err)
    elif doc != [sorted(l) for l in LAYERS]:
        problems.append("docs/architecture.md's layer list differs from scripts/check_layers.py: "
                        f"doc {doc} vs check {[sorted(l) for l in LAYERS]}")

    known = {f for names in LAYERS for f in names}
    checked = 0
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        first = rel_dir.split(os.sep)[0]
        if rel_dir == ".":
            dirnames[:] = [d for d in dirnames
                           if d not in IGNORED and not d.startswith((".", "build"))]
            continue
        if first in IGNORED or first.startswith(".") or first.startswith("build"):
            dirnames[:] = []
            continue
        for name in filenames:
            if not name.endswith((".cpp", ".hpp", ".h", ".cc")):
                continue
            rel = os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/")
            src = top_folder(rel)
            if src not in known:
                problems.append(f"{rel}: folder '{src}' is in no layer (add it to docs/architecture.md "
                                "and scripts/check_layers.py)")
                continue
            parts = rel.split("/")
            if (parts[0] != "include" and len(parts) > 2
                    and layer_of(parts[0]) < len(LAYERS) - 1
                    and parts[1] not in SUBFOLDERS.get(parts[0], set())):
                problems.append(f"{rel}: subfolder '{parts[0]}/{parts[1]}/' is unknown (add it to "
                                "SUBFOLDERS in scripts/check_layers.py and to docs/architecture.md)")
            checked += 1
            text = open(os.path.join(dirpath, name), encoding="utf-8", errors="replace").read()
            includes = INCLUDE.findall(text)
            if rel.startswith("include/mibyan/") and name in PUBLIC_VOCABULARY and includes:
                problems.append(f"{rel}: a public vocabulary header includes \"{includes[0]}\"; "
                                "it must include only the standard library")
            for inc in includes:
                dst = top_folder(inc)
                if "/" not in inc or dst not in known:
                    continue
                ls, ld = layer_of(src), layer_of(dst)
                if ld > ls:
                    problems.append(f"{rel}: includes \"{inc}\": layer {ld} ({dst}/) is above "
                                    f"layer {ls} ({src}/)")
                elif (ld == ls and dst != src and (src, dst) not in ALLOWED_SAME_LAYER
                      and not is_vocabulary(inc)):
                    problems.append(f"{rel}: includes \"{inc}\": {src}/ and {dst}/ share layer {ls} "
                                    "and must not include each other")

    for p in problems:
        print("layering: " + p)
    print(f"layering: {checked} files checked, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
