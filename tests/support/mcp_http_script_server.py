#!/usr/bin/env python3
"""A scripted MCP Streamable HTTP server (stdlib only) for
tests/mcp_http_transport_test.cpp. It listens on 127.0.0.1:<--port>, serves POST/GET/DELETE on /mcp, and records every request; GET /log
returns the record as JSON (one object per request: verb, rpc method,
Mcp-Session-Id, MCP-Protocol-Version, Last-Event-ID, Authorization).

Options (argv):
  --port P       the port to listen on
  --version V    the protocolVersion initialize answers (default: the
                 client's when it is 2025-11-25 or 2025-06-18, else
                 2025-06-18)
  --token T      every request needs "Authorization: Bearer T" (else 401
                 with a WWW-Authenticate header)
  --no-get       GET /mcp answers 405
  --get-drop     the GET stream ends after each event it sent (with
                 retry 30); a GET naming that event's id as Last-Event-ID
                 resumes it

Tools (tools/call name):
  echo           {"text"} -> "echo: <text>" as one JSON response
  resumable      an SSE response that sends a priming event (id, retry 50)
                 and ends before the reply; a GET with that Last-Event-ID
                 replays the reply
  grow           adds the tool `fresh` and sends
                 notifications/tools/list_changed on the GET stream
  ask_roots      sends roots/list on the GET stream, waits for the answer
                 and returns it as text
  expire         forgets the session: later requests with its id get 404
  garbage        an SSE response whose event is not JSON
  huge           an SSE response with one 2 MiB event
"""
import json
import queue
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ARGS = sys.argv[1:]


def dumps(x):
    return json.dumps(x, separators=(",", ":"))


def opt(name, default=None):
    if name in ARGS:
        i = ARGS.index(name)
        return ARGS[i + 1] if i + 1 < len(ARGS) else True
    return default


VERSION = opt("--version")
TOKEN = opt("--token")
NO_GET = "--no-get" in ARGS
GET_DROP = "--get-drop" in ARGS

LOCK = threading.Lock()
LOG = []
SESSIONS = {}  # id -> {"queue": Queue, "replies": {event id: message}}
GROWN = set()
ANSWERS = {}  # request id -> result (answers the client POSTed)
ANSWERED = threading.Condition(LOCK)
COUNTER = [0]

TOOLS = [
    {"name": n, "description": "scripted " + n,
     "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}
    for n in ["echo", "resumable", "grow", "ask_roots", "expire", "garbage",
              "huge"]
]


def next_id(prefix):
    with LOCK:
        COUNTER[0] += 1
        return "%s-%d" % (prefix, COUNTER[0])


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def record(self, verb, method=None):
        with LOCK:
            LOG.append({
                "verb": verb,
                "method": method,
                "session": self.headers.get("Mcp-Session-Id"),
                "version": self.headers.get("MCP-Protocol-Version"),
                "last_event_id": self.headers.get("Last-Event-ID"),
                "auth": self.headers.get("Authorization"),
            })

    def plain(self, code, body=b"", ctype="application/json", extra=None):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def authorized(self):
        if TOKEN is None or self.path == "/log":
            return True
        if self.headers.get("Authorization") == "Bearer " + TOKEN:
            return True
        self.plain(401, b'{"error":"unauthorized"}', extra={
            "WWW-Authenticate": 'Bearer resource_metadata="http://127.0.0.1/'
                                '.well-known/oauth-protected-resource", '
                                'scope="mcp.tools"'})
        return False

    def session(self):
        sid = self.headers.get("Mcp-Session-Id")
        with LOCK:
            return sid, SESSIONS.get(sid)

    def sse_start(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def event(self, text):
        self.wfile.write(text.encode())
        self.wfile.flush()

    # -- GET: the server's stream, or a resumption --------------------------
    def do_GET(self):
        if self.path == "/log":
            with LOCK:
                body = dumps(LOG).encode()
            self.plain(200, body)
            return
        self.record("GET")
        if not self.authorized():
            return
        sid, st = self.session()
        if sid is not None and st is None:
            self.plain(404, b'{"error":"unknown session"}')
            return
        last = self.headers.get("Last-Event-ID")
        if last:
            reply = st["replies"].pop(last, None) if st else None
            if reply is None and (st is None or last not in st["listened"]):
                self.plain(400, b'{"error":"unknown event id"}')
                return
            if reply is not None:
                self.sse_start()
                self.event("id: %s\ndata: %s\n\n" % (next_id(sid), dumps(reply)))
                return
            # else: the GET stream resumed after `last`
        if NO_GET or st is None:
            self.plain(405, b"")
            return
        self.sse_start()
        self.event(": listening\n\n")
        q = st["queue"]
        while True:
            try:
                msg = q.get(timeout=0.2)
            except queue.Empty:
                with LOCK:
                    if SESSIONS.get(sid) is not st:
                        return  # deleted or expired
                continue
            eid = next_id(sid)
            with LOCK:
                st["listened"].add(eid)
            try:
                self.event("id: %s\ndata: %s\n\n" % (eid, dumps(msg)))
                if GET_DROP:
                    self.event("retry: 30\n\n")
                    return  # the connection ends; the stream goes on
            except OSError:
                return

    # -- DELETE: end the session ----------------------------------------------
    def do_DELETE(self):
        self.record("DELETE")
        if not self.authorized():
            return
        sid, st = self.session()
        with LOCK:
            SESSIONS.pop(sid, None)
        self.plain(200 if st else 404, b"")

    # -- POST: one JSON-RPC message -------------------------------------------
    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(n)
        try:
            msg = json.loads(raw)
        except ValueError:
            self.record("POST")
            self.plain(400, b'{"error":"parse error"}')
            return
        method = msg.get("method")
        self.record("POST", method)
        if not self.authorized():
            return
        rid = msg.get("id")
        if method is None:  # a response to one of our requests
            with ANSWERED:
                ANSWERS[rid] = msg.get("result", msg.get("error"))
                ANSWERED.notify_all()
            self.plain(202)
            return
        if method == "initialize":
            asked = msg["params"].get("protocolVersion")
            version = VERSION or (asked if asked in ("2025-11-25", "2025-06-18")
                                  else "2025-06-18")
            sid = next_id("sess")
            with LOCK:
                SESSIONS[sid] = {"queue": queue.Queue(), "replies": {},
                                 "listened": set()}
            body = dumps({"jsonrpc": "2.0", "id": rid, "result": {
                "protocolVersion": version,
                "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": "scripted", "version": "1"}}}).encode()
            self.plain(200, body, extra={"Mcp-Session-Id": sid})
            return
        sid, st = self.session()
        if st is None:
            self.plain(404 if sid else 400, b'{"error":"unknown session"}')
            return
        if rid is None:  # notifications
            self.plain(202)
            return

        def result(res):
            return {"jsonrpc": "2.0", "id": rid, "result": res}

        def text(t):
            return result({"content": [{"type": "text", "text": t}]})

        if method == "tools/list":
            tools = list(TOOLS)
            if sid in GROWN:
                tools.append({"name": "fresh", "description": "grown later",
                              "inputSchema": {"type": "object"}})
            self.plain(200, dumps(result({"tools": tools})).encode())
            return
        if method == "ping":
            self.plain(200, dumps(result({})).encode())
            return
        if method != "tools/call":
            self.plain(200, dumps({"jsonrpc": "2.0", "id": rid, "error": {
                "code": -32601, "message": "no " + method}}).encode())
            return
        name = msg["params"]["name"]
        args = msg["params"].get("arguments") or {}
        if name == "echo":
            self.plain(200, dumps(text("echo: " + args.get("text", ""))).encode())
        elif name == "resumable":
            eid = next_id(sid)
            with LOCK:
                st["replies"][eid] = text("resumed reply")
            self.sse_start()
            self.event("id: %s\nretry: 50\ndata:\n\n" % eid)
            # ends here: the client resumes with Last-Event-ID
        elif name == "grow":
            with LOCK:
                GROWN.add(sid)
            st["queue"].put({"jsonrpc": "2.0",
                             "method": "notifications/tools/list_changed"})
            self.plain(200, dumps(text("grown")).encode())
        elif name == "ask_roots":
            qid = next_id("roots")
            st["queue"].put({"jsonrpc": "2.0", "id": qid, "method": "roots/list"})
            with ANSWERED:
                ANSWERED.wait_for(lambda: qid in ANSWERS, timeout=20)
                got = ANSWERS.get(qid)
            self.plain(200, dumps(text("roots: " + dumps(got))).encode())
        elif name == "expire":
            with LOCK:
                SESSIONS.pop(sid, None)
            self.plain(200, dumps(text("expired")).encode())
        elif name == "garbage":
            self.sse_start()
            self.event("id: g1\ndata: {this is not json\n\n")
        elif name == "huge":
            self.sse_start()
            self.event("data: " + "x" * (2 << 20) + "\n\n")
        else:
            self.plain(200, dumps({"jsonrpc": "2.0", "id": rid, "error": {
                "code": -32602, "message": "unknown tool " + name}}).encode())


def main():
    server = ThreadingHTTPServer(("127.0.0.1", int(opt("--port", "0"))),
                                 Handler)
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()
