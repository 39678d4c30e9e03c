#!/usr/bin/env python3
"""The soak run's provider stand-in (bench/soak.cpp; docs/testing.md, "Soak").

An OpenAI-compatible /v1/chat/completions on 127.0.0.1 (ephemeral port,
printed as the first line of stdout). Each reply is decided at random, per
request, with the probabilities below (argument: a random seed):

  429 with Retry-After: 0, 500, a malformed body, a tool call with broken
  JSON arguments or an unknown tool name; otherwise, while the request holds
  fewer tool results after its last user message than ROUNDS, a tool call
  (read_file, terminal, or execute_code whose script calls tools), else an
  answer. Replies wait 0-40 ms, so many conversations are in flight at once.
GET /__stats returns the counts of what was sent.
"""

import json
import random
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROUNDS = 2
P_429, P_500, P_MALFORMED, P_BAD_CALL = 0.03, 0.03, 0.02, 0.02
STATS = {}
LOCK = threading.Lock()
RNG = random.Random(int(sys.argv[1]) if len(sys.argv) > 1 else 1)


def count(kind):
    with LOCK:
        STATS[kind] = STATS.get(kind, 0) + 1


def completion(content=None, call=None):
    msg = {"role": "assistant", "content": content}
    if call:
        name, args = call
        msg["tool_calls"] = [{"id": "call_%d" % RNG.randrange(1 << 30),
                              "type": "function",
                              "function": {"name": name, "arguments": args}}]
    return json.dumps({
        "id": "chatcmpl-soak", "object": "chat.completion", "model": "m",
        "choices": [{"index": 0, "message": msg,
                     "finish_reason": "tool_calls" if call else "stop"}],
        "usage": {"prompt_tokens": 20, "completion_tokens": 5,
                  "total_tokens": 25}})


SCRIPT = ("from mibyan_tools import terminal, read_file\n"
          "r = terminal('echo soak-%d')\n"
          "t = read_file(%r, limit=3)\n"
          "x = sum(range(%d))\n"
          "print(r['output'].strip(), len(t.get('content', '')), x)\n")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def send(self, status, body, ctype="application/json", headers=()):
        data = body.encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the turn was interrupted

    def do_GET(self):
        with LOCK:
            self.send(200, json.dumps(STATS))

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n)
        try:
            req = json.loads(raw)
        except ValueError:
            count("bad_request")
            return self.send(400, '{"error":{"message":"bad json"}}')
        with LOCK:
            r = RNG.random()
            delay = RNG.random() * 0.04
            pick = RNG.randrange(3)
            seed = RNG.randrange(1000)
        time.sleep(delay)
        msgs = req.get("messages", [])
        last_user = max([i for i, m in enumerate(msgs)
                         if m.get("role") == "user"] or [0])
        rounds = sum(1 for m in msgs[last_user:] if m.get("role") == "tool")
        path = __file__
        if r < P_429:
            count("429")
            return self.send(429, '{"error":{"message":"slow down"}}',
                             headers=[("Retry-After", "0")])
        r -= P_429
        if r < P_500:
            count("500")
            return self.send(500, '{"error":{"message":"upstream broke"}}')
        r -= P_500
        if r < P_MALFORMED:
            count("malformed")
            return self.send(200, '{"id":"x","choices":[{"message":{"role"')
        r -= P_MALFORMED
        if r < P_BAD_CALL:
            count("bad_call")
            if pick == 0:
                return self.send(200, completion(call=("read_file",
                                                       '{"path": "x"')))
            return self.send(200, completion(call=("no_such_tool_%d" % pick,
                                                   "{}")))
        if rounds < ROUNDS:
            if pick == 0:
                count("read_file")
                call = ("read_file", json.dumps({"path": path, "limit": 5}))
            elif pick == 1:
                count("terminal")
                call = ("terminal", json.dumps({"command": "echo %d" % seed}))
            else:
                count("execute_code")
                call = ("execute_code", json.dumps(
                    {"code": SCRIPT % (seed, path, seed)}))
            return self.send(200, completion(call=call))
        count("answer")
        return self.send(200, completion(content="done after %d rounds"
                                                 % rounds))


class Server(ThreadingHTTPServer):
    request_queue_size = 1024
    daemon_threads = True


def main():
    server = Server(("127.0.0.1", 0), Handler)
    sys.stdout.write("%d\n" % server.server_address[1])
    sys.stdout.flush()
    server.serve_forever(poll_interval=0.1)


if __name__ == "__main__":
    main()
