#!/usr/bin/env python3
"""Fails when a cross-folder header declares a fallible call without the
one error type (docs/architecture.md, "Errors").

A header is cross-folder when a file of another top-level folder includes
it; the public headers (include/mibyan/) count too. In such headers a
fallible function returns `mibyan::status` or `result<T>`
(base/status.hpp). This check finds the older shapes:

  out-param   a `std::string* error` or `std::string& error` parameter
              (or `err`, `why`);
  refusal     a function returning `std::optional<std::string>` where
              the string is the reason for a refusal or failure;
  empty-ok    a function returning std::string whose comment says it
              returns "" on success and the error text otherwise;
  error-struct a struct with its own `std::string error` member.

Each hit is an error unless ALLOWED lists it (file, name) with the reason
it stays. A reason is required: a listed entry is a decision someone made.
Entries that no longer match anything are errors too (when checking the
repository itself), so the list cannot rot.

Usage: check_errors.py [REPO_ROOT]   exit 0 clean, 1 problems, 2 usage.
       check_errors.py --list [REPO_ROOT]   print every hit, allowed or not.
"""
import os
import re
import sys

# (header, name) -> why this shape stays. Names are the function, type
# alias or struct the hit belongs to.
ALLOWED = {
    # -- Records whose error text is data, not the failure of a call --------
    ("acp/acp_connection.hpp", "waiter"):
        "the slot a request waits in: the client's error reply is data",
    ("agent/tool_call_repair.hpp", "normalized_arguments"):
        "the text is recorded and run on both paths; the parser's message "
        "is part of the call record, not a failure of normalize_arguments",
    ("agent/tool_guardrails.hpp", "before_call"):
        "returns the tool result to hand the model instead of running the "
        "call (a BLOCKED result object), not why before_call failed",
    ("base/http_client.hpp", "http_response_summary"):
        "delivered to callbacks with several outcome flags (blocked, "
        "capped, timed_out, cancelled) beside the text; get_status() gives "
        "the status",
    ("base/json.hpp", "parse_result"):
        "the JSON parser's own value-or-message (about 290 call sites); "
        "same meaning as result<json::value>, kept as the parser's type",
    ("cron/engine.hpp", "cron_outcome"):
        "the runner's report of a run: `error` is the run's recorded error "
        "(status 'error' is one outcome among ok/silent/delivery_failed)",
    ("kernels/cell_result.hpp", "cell_outcome"):
        "a cell's outcome for the model: the script's own error is data",
    ("messages/chat.hpp", "chat_response"):
        "a message (wire record) from the provider actor; the provider's "
        "error text travels in it",
    ("serve/responses.hpp", "response_end"):
        "the fields of a Responses API object (status/error are wire data)",
    ("storage/cron_record.hpp", "cron_run_record"):
        "a stored record: the run's error text is data",
    ("tools/mcp/mcp_message.hpp", "mcp_incoming"):
        "a parsed JSON-RPC message: the peer's error reply is data",
    ("tools/mcp/mcp_session.hpp", "pending"):
        "the slot a request waits in: the server's error reply is data",
    ("tools/mcp/mcp_tools.hpp", "mcp_server_report"):
        "a server's state report for people: the last error is data",
    ("include/mibyan/turn.hpp", "turn_result"):
        "a turn's record in the public API: a failed turn is an answer to "
        "show with its messages, usage and exit reason; the error is data",
}

SOURCE_FOLDERS = {
    "messages", "base", "config", "kernels", "storage", "approvals", "cron",
    "tools", "providers", "agent", "actors", "runtime", "serve", "cluster",
    "mcp_server", "acp", "cli", "bench", "examples", "fuzz", "include",
}
INCLUDE = re.compile(r'^\s*#\s*include\s+["<]([^">]+)[">]', re.M)

OUT_PARAM = re.compile(
    r'(?<!const )std::string\s*[*&]\s*(?:error|err|why|error_out|errmsg)\b'
    r'(?!\s*\()')
# A declaration `std::optional<std::string> name(` (a function, not a
# member variable), or a std::function returning one.
OPT_FN = re.compile(r'std::optional<std::string>\s*\n?\s*([A-Za-z_]\w*)\s*\(')
OPT_ALIAS = re.compile(
    r'using\s+(\w+)\s*=\s*std::function<\s*std::optional<std::string>\s*\(')
# A std::string-returning declaration and the doc comment above it.
STR_FN = re.compile(
    r'((?:^[ \t]*///[^\n]*\n)+)[ \t]*(?:static\s+|virtual\s+)?'
    r'std::string\s+([A-Za-z_]\w*)\s*\(', re.M)
EMPTY_OK = re.compile(
    r'""\s*(?:on|for|means|=)\s*success|empty on success|'
    r'returns?\s+""\s+or\b|""\s+or\s+(?:an?\s+|the\s+)?(?:error|why|reason)|'
    r'""\s+when\s+(?:valid|ok|approved|it (?:worked|succeeded))|'
    r'else\s+why\s+not|\(""\s+on\s+success\)|'
    r'error message\s+\(""\s+on success\)|the reason\s+\(""|'
    r'""\s+(?:when|if)\b[^.;]*?[.;,]?\s*(?:else|otherwise)\b|'
    r'""\s+when\s+it\s+is\s+acceptable',
    re.I | re.S)
STRUCT = re.compile(r'^(?:struct|class)\s+(\w+)(?:\s+final)?\s*(?::[^{;]*)?\{', re.M)
ERROR_FIELD = re.compile(r'^\s+std::string\s+(error|err)\b\s*(?:;|=|\{)', re.M)


def rel(root, path):
    return os.path.relpath(path, root).replace(os.sep, "/")


def source_files(root):
    for dirpath, dirnames, filenames in os.walk(root):
        r = rel(root, dirpath)
        top = r.split("/")[0]
        if r == ".":
            dirnames[:] = [d for d in dirnames if d in SOURCE_FOLDERS]
            continue
        for name in filenames:
            if name.endswith((".hpp", ".cpp", ".h")):
                yield rel(root, os.path.join(dirpath, name))


def cross_folder_headers(root):
    files = list(source_files(root))
    includers = {}
    for f in files:
        text = open(os.path.join(root, f), encoding="utf-8",
                    errors="replace").read()
        for inc in INCLUDE.findall(text):
            includers.setdefault(inc, set()).add(f.split("/")[0])
    out = []
    for f in files:
        if not f.endswith((".hpp", ".h")):
            continue
        if f.startswith("include/mibyan/"):
            out.append(f)
            continue
        top = f.split("/")[0]
        if any(t != top for t in includers.get(f, ())):
            out.append(f)
    return sorted(out)


def strip_line_comments(text):
    return re.sub(r'//[^\n]*', lambda m: ' ' * len(m.group(0)), text)


def enclosing_name(code, pos):
    """The function whose parameter list holds `pos` (the identifier before
    the innermost open '(' around it)."""
    depth = 0
    i = pos
    while i > 0:
        i -= 1
        c = code[i]
        if c == ')':
            depth += 1
        elif c == '(':
            if depth == 0:
                m = re.search(r'([A-Za-z_][\w:]*)\s*$', code[:i])
                return m.group(1).split("::")[-1] if m else "?"
            depth -= 1
        elif c in ';{}' and depth == 0:
            break
    return "?"


def struct_bodies(code):
    """(name, body) of each top-level or nested struct/class definition."""
    for m in re.finditer(r'\b(?:struct|class)\s+(\w+)(?:\s+final)?\s*(?::[^{;()]*)?\{',
                         code):
        depth, i = 1, m.end()
        while i < len(code) and depth:
            if code[i] == '{':
                depth += 1
            elif code[i] == '}':
                depth -= 1
            i += 1
        body = code[m.end():i - 1]
        # Leave out nested structs' bodies: they are reported on their own.
        flat, d = [], 0
        for ch in body:
            if ch == '{':
                d += 1
            elif ch == '}':
                d -= 1
            elif d == 0:
                flat.append(ch)
        yield m.group(1), "".join(flat)


def hits(root, header):
    text = open(os.path.join(root, header), encoding="utf-8",
                errors="replace").read()
    code = strip_line_comments(text)
    found = []
    for m in OUT_PARAM.finditer(code):
        found.append(("out-param", enclosing_name(code, m.start())))
    for m in OPT_FN.finditer(code):
        found.append(("refusal", m.group(1)))
    for m in OPT_ALIAS.finditer(code):
        found.append(("refusal", m.group(1)))
    for m in STR_FN.finditer(text):
        comment = " ".join(l.strip().lstrip("/").strip()
                           for l in m.group(1).splitlines())
        if EMPTY_OK.search(comment):
            found.append(("empty-ok", m.group(2)))
    for name, body in struct_bodies(code):
        if ERROR_FIELD.search(body):
            found.append(("error-struct", name))
    return found


def main(argv):
    listing = "--list" in argv
    args = [a for a in argv[1:] if a != "--list"]
    if len(args) > 1:
        print(__doc__)
        return 2
    root = os.path.abspath(args[0] if args else
                           os.path.join(os.path.dirname(__file__), ".."))
    problems, used = [], set()
    counts = {}
    for header in cross_folder_headers(root):
        for kind, name in hits(root, header):
            counts[kind] = counts.get(kind, 0) + 1
            key = (header, name)
            if key in ALLOWED:
                used.add(key)
                if listing:
                    print(f"errors: allowed {kind} {header}: {name}")
                continue
            line = (f"{header}: {name}: {kind} - return mibyan::status or "
                    "result<T> (base/status.hpp), or add it with a reason to "
                    "ALLOWED in scripts/check_errors.py")
            problems.append(line)
    # A fixture tree (tests/data) has none of the listed headers.
    is_repo = os.path.exists(os.path.join(root, "scripts", "check_errors.py"))
    for key in sorted(set(ALLOWED) - used) if is_repo else []:
        problems.append(f"{key[0]}: {key[1]}: listed in ALLOWED but no longer "
                        "found; remove the entry")
    for p in problems:
        print("errors: " + p)
    summary = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
    print(f"errors: {summary or 'no hits'}; {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
