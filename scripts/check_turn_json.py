#!/usr/bin/env python3
"""Fails when a turn result is read back from JSON, or a turn crosses a
boundary as JSON text.

A turn's result is the typed `turn_result` of include/mibyan/turn.hpp from
the conversation actor up to the front ends; its JSON form is rendered only
at the edges (agent/turn_result.hpp `turn_result_json`, called by the CLI,
the HTTP server, trajectories) and never parsed back. History travels as
`std::vector<chat_message>` (turn_call::history), tool activity as
`tool_event`. This check greps every product source (all folders but
tests/, docs/, scripts/, build trees) for:

  1. the names of the old text-carrying fields and types: `turn_outcome`,
     `history_json`, `cluster_turn_result`, `history_json_of`;
  2. a read of a key that only a turn result's JSON has (final_response,
     turn_exit_reason, last_reasoning, interrupt_message, pending_steer):
     a get_*/find lookup, a `["key"]` that is not an assignment, or a
     parse_members list naming one. Writing the keys (the renderer) is fine.

The test `turn_json_check` runs it on the tree, and
`turn_json_check_detects_violation` on a fixture tree with one violation of
each kind, so the check itself can fail.

Usage: check_turn_json.py [REPO_ROOT]   exit 0 clean, 1 violations, 2 usage.
"""
import os
import re
import sys

SKIP_DIRS = {"tests", "docs", "scripts", "cmake", ".git", ".ci",
             "node_modules"}
SOURCE_EXT = (".cpp", ".hpp", ".h", ".cc")

OLD_NAMES = re.compile(
    r"\b(turn_outcome|history_json|history_json_of|cluster_turn_result)\b")
TURN_KEYS = ("final_response", "turn_exit_reason", "last_reasoning",
             "interrupt_message", "pending_steer")
KEY = "(?:%s)" % "|".join(TURN_KEYS)
# get_string("final_response"...), find("turn_exit_reason"), get_bool(...)
LOOKUP = re.compile(r"\b(?:get_\w+|find)\(\s*\"%s\"" % KEY)
# ["final_response"] not followed by a single '=' (an assignment).
INDEX = re.compile(r"\[\s*\"%s\"\s*\](?!\s*=(?!=))" % KEY)
MEMBERS = re.compile(r"parse_members\s*\(([^;]*?)\)", re.S)
KEY_IN = re.compile(r"\"%s\"" % KEY)
COMMENT = re.compile(r"//.*?$|/\*.*?\*/", re.S | re.M)


def strip_comments(text):
    # Keeps line numbers: a comment becomes as many newlines as it had.
    return COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def is_build_dir(root, name):
    return name.startswith("build") or os.path.exists(
        os.path.join(root, name, "CMakeCache.txt"))


def sources(root):
    for entry in sorted(os.listdir(root)):
        full = os.path.join(root, entry)
        if not os.path.isdir(full) or entry in SKIP_DIRS \
                or entry.startswith(".") or is_build_dir(root, entry):
            continue
        for dirpath, dirnames, filenames in os.walk(full):
            dirnames[:] = sorted(d for d in dirnames
                                 if d not in SKIP_DIRS
                                 and not d.startswith("."))
            for f in sorted(filenames):
                if f.endswith(SOURCE_EXT):
                    yield os.path.join(dirpath, f)


def check_file(path, rel):
    try:
        text = open(path, encoding="utf-8", errors="replace").read()
    except OSError as e:
        return ["%s: cannot read: %s" % (rel, e)]
    code = strip_comments(text)
    problems = []
    for n, line in enumerate(code.splitlines(), 1):
        m = OLD_NAMES.search(line)
        if m:
            problems.append("%s:%d: names %s (a turn travels typed: "
                            "turn_result, turn_call::history)"
                            % (rel, n, m.group(1)))
        for rx in (LOOKUP, INDEX):
            m = rx.search(line)
            if m:
                problems.append("%s:%d: reads a turn result's JSON (%s); use "
                                "the typed turn_result"
                                % (rel, n, m.group(0).strip()))
    for m in MEMBERS.finditer(code):
        k = KEY_IN.search(m.group(1))
        if k:
            n = code.count("\n", 0, m.start()) + 1
            problems.append("%s:%d: parses a turn result (parse_members with "
                            "%s); use the typed turn_result"
                            % (rel, n, k.group(0)))
    return problems


def main():
    if len(sys.argv) > 2:
        print(__doc__)
        return 2
    root = os.path.abspath(sys.argv[1] if len(sys.argv) == 2 else
                           os.path.join(os.path.dirname(__file__), ".."))
    problems = []
    count = 0
    for path in sources(root):
        count += 1
        problems += check_file(path, os.path.relpath(path, root))
    for p in problems:
        print("turn json: " + p)
    print("turn json: %d files checked, %d problem(s)" % (count,
                                                          len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
