"""Baselines for bench/exec_bench.cpp (run with the interpreter under test).

  echo_server.py serve SOCKET
      A bare newline-JSON server on a Unix socket: answers every request
      line {"id", "tool", "args", "token"} with {"id", "result"} where the
      result is the JSON text '{"data":{"web":[]}}', as the Mibyan host
      answers a no-op web_search. Single-threaded, one connection at a time.

  echo_server.py rpc N REPS [STUB]
      Starts `serve` in a child process and times N sequential round trips
      with the same request and reply lines as an execute_code script's
      web_search("x"), REPS times:
        plain: a minimal client (json.dumps, sendall, recv to newline,
               json.loads of the reply and of its result): the floor for
               any Python client;
        stub:  the generated mibyan_tools module at path STUB (its real
               transport: leader/follower reads, request ids) against the same
               server, i.e. our client without the C++ broker.
      Prints one JSON line {"plain_us": [...], "stub_us": [...]} (per-call
      microseconds of each repetition).

  echo_server.py threads N REPS
      The ceiling that Python threads put on any bridge: starts a server
      that serves many connections at once (`serve_many`, one selector
      loop) and times N plain-client round trips from one thread, then N
      from 8 threads with a connection each (N/8 per thread), REPS times.
      Prints one JSON line {"one": [...], "eight": [...]} (calls/s).

  echo_server.py pipe
      Reads JSON lines on stdin and answers each with one JSON line on
      stdout (flushed): the floor for a pipe-driven kernel round trip.
"""

import contextlib
import importlib.util
import json
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time

RESULT = json.dumps({"data": {"web": []}}, separators=(",", ":"))


def _answer_lines(buf):
    """The replies to the complete request lines at the front of `buf`
    (removed from it), as one bytes object."""
    start = 0
    out = []
    while True:
        nl = buf.find(b"\n", start)
        if nl < 0:
            break
        msg = json.loads(buf[start:nl])
        out.append(json.dumps({"id": msg.get("id"), "result": RESULT},
                              separators=(",", ":")) + "\n")
        start = nl + 1
    del buf[:start]
    return "".join(out).encode("utf-8")


def serve(path):
    lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    lsock.bind(path)
    lsock.listen(8)
    while True:
        conn, _ = lsock.accept()
        buf = bytearray()
        while True:
            chunk = conn.recv(65536)
            if not chunk:
                break
            buf += chunk
            reply = _answer_lines(buf)
            if reply:
                conn.sendall(reply)
        conn.close()


def serve_many(path):
    import selectors
    sel = selectors.DefaultSelector()
    lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    lsock.bind(path)
    lsock.listen(64)
    sel.register(lsock, selectors.EVENT_READ, None)
    while True:
        for key, _ in sel.select():
            if key.data is None:
                conn, _ = lsock.accept()
                sel.register(conn, selectors.EVENT_READ, bytearray())
                continue
            conn, buf = key.fileobj, key.data
            chunk = conn.recv(65536)
            if not chunk:
                sel.unregister(conn)
                conn.close()
                continue
            buf += chunk
            reply = _answer_lines(buf)
            if reply:
                conn.sendall(reply)


def _switches():
    import resource
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_nvcsw + r.ru_nivcsw


def threads(n, reps):
    """Calls/s of one thread and of 8, and per call the client process's
    CPU (us) and context switches, REPS times."""
    import threading
    with _echo_server("serve_many") as path:
        plain_client(path, 200)  # warm-up
        out = {k: [] for k in ("one", "eight", "cpu1", "cpu8", "csw1",
                               "csw8")}
        for _ in range(reps):
            t, c, w = time.perf_counter(), time.process_time(), _switches()
            plain_client(path, n)
            out["one"].append(n / (time.perf_counter() - t))
            out["cpu1"].append((time.process_time() - c) * 1e6 / n)
            out["csw1"].append((_switches() - w) / n)
            ts = [threading.Thread(target=plain_client, args=(path, n // 8))
                  for _ in range(8)]
            m = n // 8 * 8
            t, c, w = time.perf_counter(), time.process_time(), _switches()
            for x in ts:
                x.start()
            for x in ts:
                x.join()
            out["eight"].append(m / (time.perf_counter() - t))
            out["cpu8"].append((time.process_time() - c) * 1e6 / m)
            out["csw8"].append((_switches() - w) / m)
        print(json.dumps(out))


def plain_client(path, n):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    token = secrets.token_urlsafe(32)
    pid = os.getpid()
    buf = bytearray()
    t = time.perf_counter()
    for seq in range(1, n + 1):
        rid = "%d-%d" % (pid, seq)
        line = json.dumps({"id": rid, "tool": "web_search",
                           "args": {"query": "x", "limit": 5},
                           "token": token})
        sock.sendall((line + "\n").encode("utf-8"))
        while True:
            nl = buf.find(b"\n")
            if nl >= 0:
                break
            buf += sock.recv(65536)
        reply = json.loads(buf[:nl])
        del buf[:nl + 1]
        assert reply["id"] == rid
        result = json.loads(reply["result"])
        assert "data" in result
    dt = time.perf_counter() - t
    sock.close()
    return dt * 1e6 / n


def load_stub(path, stub_path):
    os.environ["MIBYAN_RPC_SOCKET"] = path
    os.environ["MIBYAN_RPC_TOKEN"] = secrets.token_urlsafe(32)
    os.environ["MIBYAN_RPC_TIMEOUT"] = "300.0"
    spec = importlib.util.spec_from_file_location("mibyan_tools", stub_path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.web_search("warm-up")
    return mod


def stub_client(mod, n):
    t = time.perf_counter()
    for _ in range(n):
        r = mod.web_search("x")
        assert "data" in r, r
    dt = time.perf_counter() - t
    return dt * 1e6 / n


def rpc(n, reps, stub_path):
    with _echo_server("serve") as path:
        plain = [plain_client(path, n) for _ in range(reps)]
        stub = []
        if stub_path:
            # The server serves one connection at a time: one module, one
            # connection, closed at the end.
            mod = load_stub(path, stub_path)
            stub = [stub_client(mod, n) for _ in range(reps)]
            mod._conn.close()
        print(json.dumps({"plain_us": plain, "stub_us": stub}))


@contextlib.contextmanager
def _echo_server(mode):
    """Runs this script's server `mode` ("serve" or "serve_many") on a
    fresh socket in a child process; yields the socket's path."""
    tmp = tempfile.mkdtemp(prefix="mibyan_echo_")
    path = os.path.join(tmp, "echo.sock")
    server = subprocess.Popen([sys.executable, __file__, mode, path])
    try:
        for _ in range(500):
            if os.path.exists(path):
                break
            time.sleep(0.01)
        yield path
    finally:
        server.kill()
        server.wait()
        try:
            os.unlink(path)
            os.rmdir(tmp)
        except OSError:
            pass


def pipe():
    inp = sys.stdin.buffer
    out = sys.stdout.buffer
    while True:
        line = inp.readline()
        if not line:
            return
        msg = json.loads(line)
        out.write((json.dumps({"id": msg.get("id"), "status": "ok",
                               "stdout": ""}) + "\n").encode("utf-8"))
        out.flush()


def main(argv):
    if len(argv) >= 3 and argv[1] == "serve":
        serve(argv[2])
    elif len(argv) >= 4 and argv[1] == "rpc":
        rpc(int(argv[2]), int(argv[3]), argv[4] if len(argv) > 4 else "")
    elif len(argv) >= 3 and argv[1] == "serve_many":
        serve_many(argv[2])
    elif len(argv) >= 4 and argv[1] == "threads":
        threads(int(argv[2]), int(argv[3]))
    elif len(argv) >= 2 and argv[1] == "pipe":
        pipe()
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
