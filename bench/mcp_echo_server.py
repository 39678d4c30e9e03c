"""Servers for bench/mcp_bench.cpp, one JSON-RPC message per line on
stdin/stdout (stdlib only, same code path for both):

  mcp_echo_server.py mcp   a minimal MCP server: initialize, tools/list,
                           ping and one tool `echo` returning its `text`
  mcp_echo_server.py bare  a bare JSON-RPC echo: every request is answered
                           with {"jsonrpc","id","result": params}
"""
import json
import sys

MODE = sys.argv[1] if len(sys.argv) > 1 else "mcp"
out = sys.stdout


def reply(rid, result):
    out.write(json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}))
    out.write("\n")
    out.flush()


for line in sys.stdin:
    msg = json.loads(line)
    rid = msg.get("id")
    if rid is None:
        continue
    method = msg.get("method")
    params = msg.get("params", {})
    if MODE == "bare":
        reply(rid, params)
    elif method == "initialize":
        reply(rid, {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                    "serverInfo": {"name": "bench", "version": "1"}})
    elif method == "tools/list":
        reply(rid, {"tools": [{"name": "echo", "inputSchema": {
            "type": "object", "properties": {"text": {"type": "string"}}}}]})
    elif method == "tools/call":
        reply(rid, {"content": [{"type": "text",
                                 "text": params["arguments"].get("text", "")}]})
    else:
        reply(rid, {})
