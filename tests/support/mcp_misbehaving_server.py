#!/usr/bin/env python3
"""A small MCP stdio server (stdlib only) that breaks the protocol on
purpose, for tests/mcp_misbehave_test.cpp. The first argument picks the
misbehaviour:

  good          a correct server with tools `echo` and `boom` (isError)
  garbage       writes non-JSON lines before every reply
  oversized     answers tools/call with a message of 4 MiB on one line
  silent_init   never answers `initialize`
  id_mismatch   answers tools/call with a wrong id
  stderr_flood  writes ~20 MiB to stderr during every tools/call
  deaf_ping     never answers `ping`
  grow          a correct server whose tool `grow` adds the tool `fresh`
                and sends notifications/tools/list_changed before its reply;
                its tool `shrink` removes `echo` the same way
"""
import json
import sys

MODE = sys.argv[1] if len(sys.argv) > 1 else "good"
TOOLS = [
    {"name": "echo", "description": "Echoes `text`.",
     "inputSchema": {"type": "object",
                     "properties": {"text": {"type": "string"}},
                     "required": ["text", "ghost"]}},
    {"name": "boom", "description": "Always fails."},
    {"name": "weird-name.v2", "inputSchema": "not a schema"},
]


GROWN = []
SHRUNK = []


def send(msg):
    if MODE == "garbage":
        sys.stdout.write("this is not json\n{broken json\n\n")
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def reply(rid, result):
    send({"jsonrpc": "2.0", "id": rid, "result": result})


for line in sys.stdin:
    line = line.strip()
    if not line:
        continue
    msg = json.loads(line)
    method = msg.get("method")
    rid = msg.get("id")
    if rid is None:
        continue  # notifications
    if method == "initialize":
        if MODE == "silent_init":
            continue
        reply(rid, {"protocolVersion": "2025-06-18",
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "misbehaving", "version": "1"}})
    elif method == "tools/list":
        tools = list(TOOLS)
        if MODE == "grow":
            if SHRUNK:
                tools = [t for t in tools if t["name"] != "echo"]
            tools.append({"name": "grow", "description": "Adds `fresh`."})
            tools.append({"name": "shrink", "description": "Drops `echo`."})
            if GROWN:
                tools.append({"name": "fresh", "description": "Added later.",
                              "inputSchema": {
                                  "type": "object",
                                  "properties": {"text": {"type": "string"}}}})
        reply(rid, {"tools": tools})
    elif method == "ping":
        if MODE != "deaf_ping":
            reply(rid, {})
    elif method == "tools/call":
        name = msg["params"]["name"]
        args = msg["params"].get("arguments", {})
        if MODE == "stderr_flood":
            chunk = "x" * 1023 + "\n"
            for _ in range(20 * 1024):
                sys.stderr.write(chunk)
            sys.stderr.flush()
        if MODE == "oversized":
            reply(rid, {"content": [{"type": "text", "text": "y" * (4 << 20)}]})
        elif MODE == "id_mismatch":
            reply(rid + 1000, {"content": [{"type": "text", "text": "lost"}]})
        elif name == "shrink":
            SHRUNK.append(True)
            send({"jsonrpc": "2.0",
                  "method": "notifications/tools/list_changed"})
            reply(rid, {"content": [{"type": "text", "text": "shrunk"}]})
        elif name == "grow":
            GROWN.append(True)
            send({"jsonrpc": "2.0",
                  "method": "notifications/tools/list_changed"})
            reply(rid, {"content": [{"type": "text", "text": "grown"}]})
        elif name == "boom":
            reply(rid, {"isError": True, "content": [
                {"type": "text",
                 "text": "failed with token sk-abcdefghijklmnopqrstuvwxyz123456"}]})
        else:
            reply(rid, {"content": [{"type": "text",
                                     "text": "echo: " + args.get("text", "")}]})
    else:
        send({"jsonrpc": "2.0", "id": rid,
              "error": {"code": -32601, "message": "no " + str(method)}})
