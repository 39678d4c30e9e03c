#!/usr/bin/env python3
"""Scripted HTTP server for Mibyan's tests (stdlib only).

Binds 127.0.0.1 on an ephemeral port and prints the port as the first line
of stdout. Started and killed by tests/support/http_server.cpp.

Built-in routes (GET unless stated):
  /page                 an HTML article (title, headings, links, list, table)
  /long?chars=N         an HTML page with about N characters of text between
                        the markers HEAD-MARKER and TAIL-MARKER
  /text                 text/plain
  /json                 application/json
  /echo                 any method: JSON {method, path, query, headers, body}
  /status/N             status N with a short text body
  /redirect?to=U&code=C redirect (default 302) to U (default /page)
  /redirect-chain/N     N redirects, then /page
  /gzip                 gzip-encoded HTML (when the client accepts gzip)
  /huge?bytes=N         N bytes of text/plain streamed (default 50 MB)
  /slow?ms=N            responds after N ms (default 5000)
  /drip?chunks=N&ms=M   N lines, one every M ms, then EOF (no length)
  /sse?events=N&ms=M    a text/event-stream of N events, one every M ms
  /png                  a PNG image
  /bytes?type=T         binary bytes with content type T
  /searxng/search       SearXNG-shaped JSON for ?q= (30 results)
  /brave                Brave-shaped JSON for ?q=&count= (needs the header
                        X-Subscription-Token, else 401)
  /tavily               POST: Tavily-shaped JSON (needs "api_key" in body)
  /malformed            broken JSON with content type application/json

Control routes:
  /__requests           JSON list of the requests received so far (method,
                        path, headers, body), control routes excluded;
                        a streamed response the client closed early gets
                        "aborted": true
  /__reset              clears the request log and the scripts
  /__release            POST {"gate"}: lets the scripted answers held on
                        that gate go (a script's "hold": "NAME" waits for
                        it before answering; released gates stay open)
  /__script             POST {"path", "status", "headers", "body" (or
                        "body_b64" for bytes),
                        "chunks": [...], "chunk_ms", "delay_ms",
                        "times", "repeat_chunk", "repeat_times", "match"}: the next `times` (default 1) requests to
                        `path` get this response instead of the built-in
                        one (with "match": only requests whose body
                        contains that text, in order among themselves;
                        scripts without it take the others); `chunks` are streamed with `chunk_ms` pauses
                        (for LLM-provider stand-ins); "repeat_chunk" is
                        streamed "repeat_times" times before them.
"""

import base64
import gzip
import itertools
import json
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049"
    "454e44ae426082")

PAGE = """<!DOCTYPE html>
<html><head><title>Test &amp; Page</title>
<style>body { color: red; }</style>
<script>var secret = "SCRIPT-CONTENT";</script></head>
<body>
<nav><a href="/home">NAV-LINK</a></nav>
<article>
<h1>Main Heading</h1>
<p>First paragraph with a <a href="/other?x=1&amp;y=2">relative link</a>
and &quot;entities&quot; &eacute;&#233;&#x263A;.</p>
<h2>Sub heading</h2>
<ul><li>item one</li><li>item two</li></ul>
<table><tr><th>Name</th><th>Value</th></tr><tr><td>a</td><td>1</td></tr></table>
<pre>code line 1
  indented line 2</pre>
<img src="data:image/png;base64,iVBORw0KGgo=" alt="inline chart">
</article>
<footer>FOOTER-TEXT</footer>
</body></html>
"""


class State:
    lock = threading.Lock()
    requests = []
    scripts = {}
    gates = {}


def long_page(chars):
    para = ("Lorem ipsum dolor sit amet, consectetur adipiscing elit, "
            "sed do eiusmod tempor incididunt ut labore. ")
    parts = ["<html><head><title>Long page</title></head><body>",
             "<p>HEAD-MARKER</p>"]
    total = 0
    while total < chars:
        parts.append("<p>" + para + "</p>\n")
        total += len(para) + 2
    parts.append("<p>TAIL-MARKER</p></body></html>")
    return "".join(parts)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "MibyanTestServer/1.0"

    def log_message(self, fmt, *args):
        pass

    # -- helpers ------------------------------------------------------------

    def send(self, status, body, ctype="text/plain; charset=utf-8",
             headers=None):
        if isinstance(body, str):
            body = body.encode("utf-8")
        self.send_response(status)
        if ctype:
            self.send_header("Content-Type", ctype)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def send_json(self, status, obj, headers=None):
        self.send(status, json.dumps(obj), "application/json", headers)

    def stream(self, status, ctype, pieces, pause_s, headers=None):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        try:
            for piece in pieces:
                if isinstance(piece, str):
                    piece = piece.encode("utf-8")
                self.wfile.write(piece)
                self.wfile.flush()
                if pause_s > 0:
                    time.sleep(pause_s)
        except (BrokenPipeError, ConnectionResetError):
            entry = getattr(self, "log_entry", None)
            if entry is not None:
                with State.lock:
                    entry["aborted"] = True

    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n > 0 else b""

    # -- dispatch -----------------------------------------------------------

    def do_GET(self):
        self.dispatch()

    def do_POST(self):
        self.dispatch()

    def do_PUT(self):
        self.dispatch()

    def do_DELETE(self):
        self.dispatch()

    def do_HEAD(self):
        self.dispatch()

    def dispatch(self):
        body = self.read_body()
        url = urllib.parse.urlsplit(self.path)
        path = url.path
        query = urllib.parse.parse_qs(url.query)
        arg = lambda k, d=None: query.get(k, [d])[0]
        self.log_entry = None
        if not path.startswith("/__"):
            self.log_entry = {
                "method": self.command,
                "path": self.path,
                "headers": {k: v for k, v in self.headers.items()},
                "body": body.decode("utf-8", "replace"),
            }
            with State.lock:
                State.requests.append(self.log_entry)
            with State.lock:
                queue = State.scripts.get(path)
                scripted = None
                if queue:
                    text = body.decode("utf-8", "replace")
                    for i, cand in enumerate(queue):
                        m = cand.get("match")
                        if m is None or m in text:
                            scripted = queue.pop(i)
                            break
            if scripted is not None:
                return self.scripted(scripted)
        try:
            self.route(path, arg, body)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def scripted(self, s):
        if s.get("hold"):
            with State.lock:
                gate = State.gates.setdefault(s["hold"], threading.Event())
            gate.wait(120)
        if s.get("delay_ms"):
            time.sleep(s["delay_ms"] / 1000.0)
        status = int(s.get("status", 200))
        headers = dict(s.get("headers", {}))
        ctype = headers.pop("Content-Type", "application/json")
        if "chunks" in s:
            pieces = s["chunks"]
            if s.get("repeat_times"):
                # "repeat_chunk" sent "repeat_times" times before "chunks"
                # (large provider streams without a large script).
                rep, n = s["repeat_chunk"], int(s["repeat_times"])
                pieces = itertools.chain(
                    itertools.repeat(rep.encode("utf-8"), n), pieces)
            return self.stream(status, ctype, pieces,
                               s.get("chunk_ms", 0) / 1000.0, headers)
        body = s.get("body", "")
        if "body_b64" in s:
            body = base64.b64decode(s["body_b64"])
        return self.send(status, body, ctype, headers)

    def route(self, path, arg, body):
        if path == "/__requests":
            with State.lock:
                return self.send_json(200, State.requests)
        if path == "/__reset":
            with State.lock:
                State.requests.clear()
                State.scripts.clear()
            return self.send_json(200, {"ok": True})
        if path == "/__release":
            name = json.loads(body)["gate"]
            with State.lock:
                gate = State.gates.setdefault(name, threading.Event())
            gate.set()
            return self.send_json(200, {"ok": True})
        if path == "/__script":
            spec = json.loads(body)
            times = int(spec.get("times", 1))
            with State.lock:
                State.scripts.setdefault(spec["path"], []).extend(
                    [spec] * times)
            return self.send_json(200, {"ok": True})
        if path in ("/", "/page"):
            return self.send(200, PAGE, "text/html; charset=utf-8")
        if path == "/long":
            return self.send(200, long_page(int(arg("chars", "100000"))),
                             "text/html")
        if path == "/text":
            return self.send(200, "plain text body\nsecond line\n")
        if path == "/json":
            return self.send_json(200, {"hello": "world", "n": 42})
        if path == "/echo":
            return self.send_json(200, {
                "method": self.command,
                "path": self.path,
                "headers": {k: v for k, v in self.headers.items()},
                "body": body.decode("utf-8", "replace"),
            })
        if path.startswith("/status/"):
            code = int(path[len("/status/"):])
            return self.send(code, "status %d body" % code)
        if path == "/redirect":
            code = int(arg("code", "302"))
            return self.send(code, "redirecting", "text/plain",
                             {"Location": arg("to", "/page")})
        if path.startswith("/redirect-chain/"):
            n = int(path[len("/redirect-chain/"):])
            to = "/redirect-chain/%d" % (n - 1) if n > 1 else "/page"
            return self.send(302, "", "text/plain", {"Location": to})
        if path == "/gzip":
            if "gzip" not in (self.headers.get("Accept-Encoding") or ""):
                return self.send(406, "client did not accept gzip")
            data = gzip.compress(
                b"<html><head><title>Zipped</title></head><body>"
                + b"<p>GZIP-CONTENT</p>" * 200 + b"</body></html>")
            return self.send(200, data, "text/html",
                             {"Content-Encoding": "gzip"})
        if path == "/huge":
            total = int(arg("bytes", str(50 * 1024 * 1024)))
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(total))
            self.end_headers()
            chunk = (b"x" * 1023 + b"\n") * 64
            sent = 0
            while sent < total:
                piece = chunk[:min(len(chunk), total - sent)]
                self.wfile.write(piece)
                sent += len(piece)
            return
        if path == "/slow":
            time.sleep(int(arg("ms", "5000")) / 1000.0)
            return self.send(200, "slow done")
        if path == "/drip":
            n = int(arg("chunks", "10"))
            ms = int(arg("ms", "100"))
            return self.stream(200, "text/plain",
                               ("chunk %d\n" % i for i in range(n)),
                               ms / 1000.0)
        if path == "/sse":
            n = int(arg("events", "5"))
            ms = int(arg("ms", "10"))
            events = ["data: {\"i\": %d}\n\n" % i for i in range(n)]
            events.append("data: [DONE]\n\n")
            return self.stream(200, "text/event-stream", events, ms / 1000.0)
        if path == "/png":
            return self.send(200, PNG, "image/png")
        if path == "/bytes":
            return self.send(200, bytes(range(256)) * 4,
                             arg("type", "application/octet-stream"))
        if path == "/searxng/search":
            q = arg("q", "")
            if arg("format") != "json":
                return self.send(403, "format not allowed")
            results = [{"title": "Result %d: %s" % (i, q),
                        "url": "https://example.com/%d" % i,
                        "content": "Snippet %d about %s" % (i, q),
                        "engine": "test"} for i in range(1, 31)]
            return self.send_json(200, {"query": q, "results": results})
        if path == "/brave":
            if not self.headers.get("X-Subscription-Token"):
                return self.send_json(401, {"error": "missing token"})
            q = arg("q", "")
            count = min(int(arg("count", "20")), 20)
            results = [{"title": "Brave %d: %s" % (i, q),
                        "url": "https://brave.example/%d" % i,
                        "description": "About <strong>%s</strong> &amp; "
                                       "more %d" % (q, i)}
                       for i in range(1, count + 1)]
            return self.send_json(200, {"type": "search",
                                        "web": {"results": results}})
        if path == "/tavily":
            req = json.loads(body or b"{}")
            if not req.get("api_key"):
                return self.send_json(401, {"detail": "missing api_key"})
            n = int(req.get("max_results", 5))
            results = [{"title": "Tavily %d: %s" % (i, req.get("query")),
                        "url": "https://tavily.example/%d" % i,
                        "content": "Tavily snippet %d" % i}
                       for i in range(1, n + 1)]
            return self.send_json(200, {"results": results})
        if path == "/malformed":
            return self.send(200, '{"results": [ {"title": ',
                             "application/json")
        return self.send(404, "no such route: " + path)


class Server(ThreadingHTTPServer):
    request_queue_size = 128
    daemon_threads = True
    allow_reuse_address = True


def main():
    server = Server(("127.0.0.1", 0), Handler)
    sys.stdout.write("%d\n" % server.server_address[1])
    sys.stdout.flush()
    server.serve_forever(poll_interval=0.1)


if __name__ == "__main__":
    main()
