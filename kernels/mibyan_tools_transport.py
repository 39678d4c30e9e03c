# mibyan_tools: call Mibyan agent tools from an execute_code script.
#
# Generated for one kernel by the Mibyan host; do not edit. Each tool
# function sends one request over the kernel's Unix socket and returns the
# tool's result as a dict. Tool errors come back as {"error": "..."};
# transport failures raise ConnectionError (or TimeoutError).
#
# Source: kernels/mibyan_tools_transport.py, embedded into the host at build
# time (kernels/stub_generator.cpp); the host fills AVAILABLE_TOOLS and
# appends one function per tool.
"""Mibyan tools for execute_code scripts.

Import what you need explicitly, e.g.::

    from mibyan_tools import read_file, json_parse

AVAILABLE_TOOLS lists the tools this kernel may call.
"""

import itertools as _itertools
import json as _json
import os as _os
import select as _select
import shlex as _shlex
import socket as _socket
import struct as _struct
import sys as _sys
import threading as _threading
import time as _time
import weakref as _weakref

AVAILABLE_TOOLS = ()  # replaced by the generator: the tools of this kernel

HELPERS = ("json_parse", "shell_quote", "retry")
__all__ = list(AVAILABLE_TOOLS) + list(HELPERS)

_ENV_SOCKET = "MIBYAN_RPC_SOCKET"
_ENV_TOKEN = "MIBYAN_RPC_TOKEN"
_ENV_TIMEOUT = "MIBYAN_RPC_TIMEOUT"
_ENV_CELL = "MIBYAN_RPC_CELL"
_DEFAULT_TIMEOUT = 300.0
_LOST = ("mibyan_tools: connection lost after '%s' was sent; outcome "
         "unknown \u2014 check the effect before retrying.")
_lenient = _json.JSONDecoder(strict=False)


# -- helpers ----------------------------------------------------------------

def json_parse(text):
    """Parses JSON text leniently: strips a UTF-8 BOM and allows control
    characters inside strings. Accepts str or UTF-8 bytes."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8")
    if text.startswith("\ufeff"):
        text = text[1:]
        if text.startswith("\ufeff"):
            raise _json.JSONDecodeError("Unexpected UTF-8 BOM (decode using "
                                        "utf-8-sig)", text, 0)
    return _lenient.decode(text)


def shell_quote(s):
    """Quotes a string for a POSIX shell (as shlex.quote)."""
    return _shlex.quote(s)


def retry(fn, max_attempts=3, delay=2):
    """Calls fn() until it returns without raising, at most max_attempts
    times, sleeping delay * 2**attempt seconds after each failure. Re-raises
    the last error."""
    attempts = max(1, int(max_attempts))
    for attempt in range(attempts):
        try:
            return fn()
        except Exception:
            if attempt + 1 >= attempts:
                raise
            _time.sleep(delay * (2 ** attempt))


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    raise AttributeError(
        "'%s' is not available inside execute_code. Importable tools here: "
        "%s. For anything else, use the normal tool call instead of "
        "execute_code." % (name, ", ".join(AVAILABLE_TOOLS) or "none"))


# -- transport --------------------------------------------------------------
#
# No reader thread: a caller waiting for its reply becomes the reader when
# no one else is (leader/follower). The reader reads reply lines and routes
# each to the waiter registered under its id until its own reply is in, then
# wakes one caller still waiting, which takes the role over. A single-
# threaded script thus sends and reads on its own thread, without hand-offs.

_encoder = _json.JSONEncoder(allow_nan=False)
_decode_line = _json.JSONDecoder().decode
_monotonic = _time.monotonic
_new_lock = _threading.Lock
_HAVE_POLL = hasattr(_select, "poll")
_BUF_SIZE = 1 << 16
_POLL_MAX_MS = 86400000
_WAIT_MAX = min(86400.0, _threading.TIMEOUT_MAX)
_RCVTIMEO = 1.0
_HAVE_RCVTIMEO = (hasattr(_socket, "SO_RCVTIMEO")
                  and _sys.platform.startswith("linux"))
_pack_timeval = _struct.Struct("@ll").pack


class _Waiter(object):
    """One call in flight. Guarded by its connection's lock: `done` turns
    true when `reply` holds the reply, or stays None because the call was
    lost. `wake`, when set, is a held lock the waiting thread blocks on;
    whoever completes the call or hands it the reader role releases it."""
    __slots__ = ("reply", "done", "wake")

    def __init__(self):
        self.reply = None
        self.done = False
        self.wake = None


class _Connection(object):
    """One Unix-socket connection, owned by one process. Any thread may
    send and wait. `lock` guards waiters, dead, reading and all waiter
    fields; only the thread holding the reader role (reading is true)
    touches the read buffer, polls, or closes the socket."""

    def __init__(self, path, cell):
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            sock.connect(path)
        except BaseException:
            sock.close()
            raise
        self.sock = sock
        # The host closes a cell's connections when the cell ends, so a
        # connection is checked for that only in a cell other than the one
        # that opened it.
        self.cell = cell
        self.fd = sock.fileno()
        self.pid = _os.getpid()
        self.lock = _threading.Lock()
        self.send_lock = _threading.Lock()
        self.waiters = {}
        self.dead = False
        self.reading = False
        self.buf = bytearray(_BUF_SIZE)
        self.view = memoryview(self.buf)
        self.start = 0
        self.end = 0
        self.refusal = None
        self.poller = None
        self.rcvtimeo = None
        if _HAVE_RCVTIMEO:
            # The reader blocks in recv() itself, woken at least every
            # _RCVTIMEO seconds to check its deadline: one system call per
            # reply instead of poll() and recv().
            self._set_rcvtimeo(_RCVTIMEO)
        elif _HAVE_POLL:
            self.poller = _select.poll()
            self.poller.register(self.fd, _select.POLLIN)

    def _set_rcvtimeo(self, seconds):
        usec = max(1000, int(seconds * 1e6))
        self.sock.setsockopt(_socket.SOL_SOCKET, _socket.SO_RCVTIMEO,
                             _pack_timeval(usec // 1000000, usec % 1000000))
        self.rcvtimeo = seconds

    def busy(self):
        """True while a call is in flight (a hint: no lock is taken)."""
        return bool(self.waiters) or self.reading

    def register(self, rid):
        waiter = _Waiter()
        with self.lock:
            if self.dead:
                return None
            self.waiters[rid] = waiter
        return waiter

    def unregister(self, rid):
        """Forgets a call no one waits for any more; passes the reader role
        on when it is free (the caller may have been handed it)."""
        with self.lock:
            self.waiters.pop(rid, None)
            if not self.reading:
                self._wake_one()

    def send(self, data):
        with self.send_lock:
            self.sock.sendall(data)

    def wait(self, waiter, deadline):
        """Returns once `waiter` is done, or at `deadline` (monotonic)."""
        lock = self.lock
        while True:
            with lock:
                if waiter.done:
                    return
                lead = not self.reading
                if lead:
                    self.reading = True
                else:
                    wake = waiter.wake = _new_lock()
                    wake.acquire()
            if lead:
                try:
                    self._lead(waiter, deadline)
                finally:
                    with lock:
                        self.reading = False
                        self._wake_one()
                return
            remaining = deadline - _monotonic()
            woken = remaining > 0 and wake.acquire(True, min(remaining,
                                                             _WAIT_MAX))
            with lock:
                waiter.wake = None
                if waiter.done or (not woken and remaining <= _WAIT_MAX):
                    return
            # Handed the reader role (or a very long wait ran out): retry.

    def _wake_one(self):
        # Caller holds self.lock and the reader role is free: wake one
        # blocked waiter so that it becomes the reader.
        for waiter in self.waiters.values():
            wake = waiter.wake
            if wake is not None:
                waiter.wake = None
                wake.release()
                return

    def _lead(self, waiter, deadline):
        # Caller holds the reader role. Reads and routes replies until
        # `waiter` is done or the deadline passes; at end of file or on a
        # read error fails every call in flight.
        try:
            while not waiter.done:
                remaining = deadline - _monotonic()
                if remaining <= 0:
                    return
                if self.rcvtimeo is not None:
                    if remaining < self.rcvtimeo or (
                            self.rcvtimeo < _RCVTIMEO
                            and remaining >= _RCVTIMEO):
                        self._set_rcvtimeo(min(remaining, _RCVTIMEO))
                    try:
                        if not self._read_replies():
                            break
                    except (BlockingIOError, InterruptedError):
                        pass # SO_RCVTIMEO passed: check the deadline
                    continue
                if self.poller is not None:
                    if not self.poller.poll(min(int(remaining * 1000) + 1,
                                                _POLL_MAX_MS)):
                        continue
                elif not _select.select((self.fd,), (), (),
                                        min(remaining, _WAIT_MAX))[0]:
                    continue
                if not self._read_replies():
                    break
            else:
                return
        except (OSError, ValueError):
            pass
        self._fail_all()

    def _read_replies(self):
        # Caller holds the reader role and the socket is readable. Reads
        # once and routes every complete line; returns False at end of file.
        buf = self.buf
        start = self.start
        end = self.end
        if end == len(buf):
            if start:
                buf[:end - start] = buf[start:end]
                end -= start
                start = 0
            else:
                grown = bytearray(2 * len(buf))
                grown[:end] = buf
                self.buf = buf = grown
                self.view = memoryview(grown)
        view = self.view
        n = self.sock.recv_into(view[end:] if end else view)
        if not n:
            return False
        scan = end
        end += n
        replies = []
        while True:
            nl = buf.find(b"\n", scan, end)
            if nl < 0:
                break
            try:
                msg = _decode_line(buf[start:nl].decode("utf-8"))
            except ValueError:
                msg = None
            if isinstance(msg, dict):
                rid = msg.get("id")
                if isinstance(rid, str):
                    replies.append((rid, msg))
                elif rid is None:
                    self._note_refusal(buf[start:nl])
            start = scan = nl + 1
        if start == end:
            start = end = 0
            if len(buf) > _BUF_SIZE:
                self.buf = bytearray(_BUF_SIZE)
                self.view = memoryview(self.buf)
        self.start = start
        self.end = end
        if replies:
            with self.lock:
                for rid, msg in replies:
                    waiter = self.waiters.pop(rid, None)
                    if waiter is not None:
                        waiter.reply = msg
                        waiter.done = True
                        wake = waiter.wake
                        if wake is not None:
                            waiter.wake = None
                            wake.release()
        return True

    def _fail_all(self):
        # Caller holds the reader role. Marks the connection dead, fails
        # every call in flight as lost and closes the socket.
        with self.lock:
            self.dead = True
            waiters = list(self.waiters.values())
            self.waiters.clear()
            for waiter in waiters:
                waiter.done = True
                wake = waiter.wake
                if wake is not None:
                    waiter.wake = None
                    wake.release()
        try:
            self.sock.shutdown(_socket.SHUT_RDWR)
        except OSError:
            pass
        with self.send_lock:
            try:
                self.sock.close()
            except OSError:
                pass

    def close(self):
        """Shuts the connection down; calls in flight fail as lost (by the
        current reader, or here when no one reads)."""
        with self.lock:
            self.dead = True
            lead = not self.reading
            if lead:
                self.reading = True
        try:
            self.sock.shutdown(_socket.SHUT_RDWR)
        except OSError:
            pass
        if lead:
            try:
                self._fail_all()
            finally:
                with self.lock:
                    self.reading = False

    def closed_by_host(self):
        """True when no call is in flight and the host has closed the
        connection (it closes a cell's connections when the cell ends)."""
        with self.lock:
            if self.dead:
                return True
            if self.reading or self.waiters:
                return False
        try:
            return self.sock.recv(1, _socket.MSG_PEEK
                                  | _socket.MSG_DONTWAIT) == b""
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:
            return True

    def take_refusal(self):
        """Returns the host's refusal text (an error line with a null id,
        sent before it closed the connection), reading it if it is still
        queued; None when there is none."""
        with self.lock:
            busy = self.reading
        if self.refusal is None and not busy:
            try:
                data = self.sock.recv(65536, _socket.MSG_DONTWAIT)
            except OSError:
                data = b""
            for line in data.split(b"\n"):
                self._note_refusal(line)
        return self.refusal

    def _note_refusal(self, line):
        try:
            msg = _decode_line(bytes(line).decode("utf-8"))
        except ValueError:
            return
        if isinstance(msg, dict) and msg.get("id") is None:
            result = msg.get("result")
            try:
                error = _json.loads(result).get("error")
            except (TypeError, ValueError, AttributeError):
                error = None
            if isinstance(error, str):
                self.refusal = error

    def abandon(self):
        """Drops a connection inherited through fork() without disturbing
        the parent's use of it."""
        try:
            self.sock.close()
        except OSError:
            pass


# -- cell tags ----------------------------------------------------------------
#
# Each call names the cell it belongs to, so the host refuses calls left
# over from a finished cell instead of charging them to the running one
# (docs/kernel_protocol.md section 5.2). The runner sets MIBYAN_RPC_CELL
# for each cell; a thread keeps the cell of the thread that started it,
# and work submitted to a ThreadPoolExecutor runs under the submitter's
# cell. A subprocess inherits the variable from the cell that started it.

_tls = _threading.local()


def _current_cell():
    cell = getattr(_tls, "cell", None)
    if cell is None:
        cell = getattr(_threading.current_thread(), "_mibyan_cell", None)
    if cell is None:
        cell = _os.environ.get(_ENV_CELL, "")
    return cell


def _tag_executor():
    # Patched lazily (importing concurrent.futures costs milliseconds):
    # an executor starts its first worker thread inside its first submit,
    # so the patch is in place before any work item runs in a later cell.
    global _executor_tagged
    module = _sys.modules.get("concurrent.futures.thread")
    if _executor_tagged or module is None:
        return
    _executor_tagged = True
    submit = module.ThreadPoolExecutor.submit

    def submit_in_cell(self, fn, *args, **kwargs):
        cell = _current_cell()

        def run(*a, **k):
            saved = getattr(_tls, "cell", None)
            _tls.cell = cell
            try:
                return fn(*a, **k)
            finally:
                _tls.cell = saved
        return submit(self, run, *args, **kwargs)

    module.ThreadPoolExecutor.submit = submit_in_cell


def _tag_threads():
    thread_start = _threading.Thread.start
    if getattr(thread_start, "_mibyan_tagged", False):
        return

    def start(self, *a, **k):
        self._mibyan_cell = _current_cell()
        _tag_executor()
        return thread_start(self, *a, **k)

    start._mibyan_tagged = True
    _threading.Thread.start = start
    _tag_executor()


_executor_tagged = False
_tag_threads()

class _EnvSetting(object):
    """A setting read from the environment on every use (a script may
    change it between calls) and parsed again only when its text changed."""
    __slots__ = ("name", "parse", "cache")

    def __init__(self, name, parse):
        self.name = name
        self.parse = parse
        self.cache = (None, None)

    def get(self):
        raw = _os.environ.get(self.name, "")
        cached = self.cache # (text, value), replaced whole: thread-safe
        if raw == cached[0]:
            return cached[1]
        value = self.parse(raw)
        self.cache = (raw, value)
        return value


# Connections. A process has one shared connection (`_conn`), opened on
# its first call; any thread may call on it, and one waiting thread at a
# time reads the replies for all (`_Connection.wait`). A thread that calls
# while another call is in flight on it opens a connection of its own
# instead (`_tls.conn`, kept for the thread's life, closed when the thread
# ends), so that concurrent threads each send and read on their own socket
# without handing replies to one another. At most that many connections
# are open per process (MIBYAN_RPC_THREAD_CONNECTIONS, default 8; 0 makes
# every thread share), and none once the host has refused one for its
# connection limit.
_state_lock = _threading.Lock()
_conn = None
_seq = _itertools.count(1)
_pid = _os.getpid()
_ENV_OWN = "MIBYAN_RPC_THREAD_CONNECTIONS"
_DEFAULT_OWN = 8
_own = _weakref.WeakSet()
_own_refused = False
_TOO_MANY = "Too many RPC connections"


def _after_fork():
    global _state_lock, _conn, _pid, _own
    _state_lock = _threading.Lock()
    _pid = _os.getpid()
    if _conn is not None and _conn.pid != _os.getpid():
        _conn.abandon()
        _conn = None
    # Only the forking thread lives on in the child; its own connection is
    # the parent's socket.
    own = getattr(_tls, "conn", None)
    if own is not None:
        own.abandon()
        _tls.conn = None
    _own = _weakref.WeakSet()


_HAVE_AT_FORK = hasattr(_os, "register_at_fork")
if _HAVE_AT_FORK:
    _os.register_at_fork(after_in_child=_after_fork)


def _connection(pid, cell):
    global _conn
    conn = _conn
    if (conn is not None and conn.cell == cell and conn.pid == pid
            and not conn.dead):
        return conn
    with _state_lock:
        conn = _conn
        if conn is not None:
            if conn.pid != pid:
                conn.abandon()
            elif not conn.closed_by_host():
                conn.cell = cell # checked for this cell
                return conn
            else:
                conn.close()
        _conn = None
        conn = _conn = _Connection(_os.environ.get(_ENV_SOCKET, ""), cell)
        return conn


def _parse_own(raw):
    try:
        return min(max(int(raw), 0), 32)
    except ValueError:
        return _DEFAULT_OWN


_max_own = _EnvSetting(_ENV_OWN, _parse_own).get


def _own_connection(pid, cell):
    """The calling thread's own connection, or None when it should share:
    it has none and the shared one is idle, or no more may be opened."""
    own = getattr(_tls, "conn", None)
    if own is not None:
        if own.pid == pid and not own.dead:
            if own.cell == cell:
                return own
            if not own.closed_by_host():
                own.cell = cell # checked for this cell
                return own
            own.close()
        _tls.conn = own = None
    shared = _conn
    if (shared is None or shared.pid != pid or shared.dead
            or not shared.busy() or _own_refused):
        return None
    with _state_lock:
        if len(_own) >= _max_own():
            return None
        own = _Connection(_os.environ.get(_ENV_SOCKET, ""), cell)
        _own.add(own)
    _tls.conn = own
    return own


def _pick(pid, cell):
    try:
        own = _own_connection(pid, cell)
    except OSError:
        own = None # the shared connection still works
    return own if own is not None else _connection(pid, cell)


def _refused_for_limit(conn):
    """True when `conn` is a thread's own connection that the host refused
    for its connection limit (nothing was run): later calls share."""
    global _own_refused
    if conn is _conn or conn.refusal is None:
        return False
    if not conn.refusal.startswith(_TOO_MANY):
        return False
    _own_refused = True
    if getattr(_tls, "conn", None) is conn:
        _tls.conn = None
    return True


def _parse_timeout(raw):
    try:
        value = float(raw)
    except ValueError:
        return _DEFAULT_TIMEOUT
    return value if 0 < value < 1e9 else _DEFAULT_TIMEOUT


_reply_timeout = _EnvSetting(_ENV_TIMEOUT, _parse_timeout).get


def _parse_result(text):
    try:
        value = json_parse(text)
    except ValueError:
        return text
    if isinstance(value, str):
        try:
            value = json_parse(value)
        except ValueError:
            pass
    return value


def _decode(msg):
    if "result" not in msg:
        error = msg.get("error")
        if isinstance(error, str):
            return {"error": error}
        return {"error": "mibyan_tools: the host replied without a result"}
    result = msg["result"]
    if isinstance(result, (str, bytes, bytearray)):
        return _parse_result(result)
    return result


def _call(tool, args):
    # Without os.register_at_fork the pid is looked up on every call.
    pid = _pid if _HAVE_AT_FORK else _os.getpid()
    rid = "%d-%d" % (pid, next(_seq)) # next() is atomic under the GIL
    cell = _current_cell()
    environ = _os.environ
    try:
        data = (_encoder.encode({"id": rid, "tool": tool, "args": args,
                                 "token": environ.get(_ENV_TOKEN, ""),
                                 "cell": cell})
                + "\n").encode("utf-8")
    except (TypeError, ValueError) as e:
        raise TypeError("mibyan_tools: the arguments of '%s' cannot be sent "
                        "as JSON: %s" % (tool, e))
    if not environ.get(_ENV_SOCKET):
        raise ConnectionError(
            "mibyan_tools: %s is not set; tools can only be called from "
            "code run by execute_code. '%s' was not sent." % (_ENV_SOCKET,
                                                            tool))
    timeout = _reply_timeout()
    problem = None
    # Reconnect only before send: a line that was not fully written is
    # discarded by the host, so it is safe to send it again once. A line
    # that was written is never sent again.
    for _attempt in range(2):
        try:
            conn = _pick(pid, cell)
        except OSError as e:
            problem = e
            continue
        waiter = conn.register(rid)
        if waiter is None:
            problem = "connection closed"
            continue
        try:
            conn.send(data)
        except OSError as e:
            conn.unregister(rid)
            refusal = conn.take_refusal()
            conn.close()
            if _refused_for_limit(conn):
                problem = refusal
                continue
            if refusal is not None:
                raise ConnectionError("mibyan_tools: the host refused '%s': "
                                      "%s" % (tool, refusal)) from None
            problem = e
            continue
        except BaseException:
            conn.unregister(rid)
            raise
        try:
            conn.wait(waiter, _monotonic() + timeout)
        finally:
            if not waiter.done:
                conn.unregister(rid)
        if waiter.reply is None:
            if not waiter.done:
                raise TimeoutError(
                    "mibyan_tools: no reply to '%s' within %gs; outcome "
                    "unknown \u2014 check the effect before retrying."
                    % (tool, timeout))
            if _refused_for_limit(conn):
                problem = conn.refusal
                continue
            if conn.refusal is not None:
                raise ConnectionError("mibyan_tools: the host refused '%s': "
                                      "%s" % (tool, conn.refusal))
            raise ConnectionError(_LOST % tool)
        return _decode(waiter.reply)
    raise ConnectionError("mibyan_tools: cannot reach the Mibyan host (%s); "
                          "'%s' was not sent." % (problem, tool))


# -- tools ------------------------------------------------------------------
