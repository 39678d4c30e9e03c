# File: kernels/mibyan_kernel_runner.py
#
# The session kernel of execute_code: a long-lived Python process that runs
# cells sent by the host (the C++ kernel actor) and answers each one with a
# framed JSON reply. Standard library only; Python >= 3.8.
#
# The protocol (cell lines, reply frames, private environment variables, the
# parent-death watchdog) is specified in docs/kernel_protocol.md. In short:
#
#   stdin   one JSON line per cell: {"id": "<hex>", "code": "<source>",
#           "timeout": <seconds, optional>}
#   fd 1    raw fd-level output of the cell (subprocesses, os.write) followed
#           by exactly one reply frame per input line:
#           "\n" SENTINEL " " <body byte length> "\n" <UTF-8 JSON body>
#   fd 2    raw fd-level stderr of the cell
#
# Invariants the host relies on:
#   * every line read from stdin produces exactly one frame;
#   * Python-level sys.stdout/sys.stderr never reach fd 1/2 while a cell runs
#     (they are captured per cell), so print() cannot forge a frame;
#   * frames are written to a private duplicate of the original fd 1, so a
#     cell that closes sys.stdout or fd 1 still gets its frame;
#   * after an "exit" frame the process ends.

import builtins
import gc
import io
import json
import os
import select
import signal
import sys
import threading
import time
import traceback
import types
import warnings
import weakref

ENV_SENTINEL_FD = "MIBYAN_KERNEL_SENTINEL_FD"
ENV_STUB = "MIBYAN_KERNEL_STUB"
ENV_WATCHDOG_FD = "MIBYAN_KERNEL_WATCHDOG_FD"
ENV_RPC_TIMEOUT = "MIBYAN_RPC_TIMEOUT"
ENV_RPC_CELL = "MIBYAN_RPC_CELL"
PRIVATE_ENV = (ENV_SENTINEL_FD, ENV_STUB, ENV_WATCHDOG_FD)
SENTINEL_MAX = 4096              # bytes read from the sentinel pipe

CAPTURE_LIMIT = 5000000          # characters kept per stream per cell
WATCHDOG_TERM_GRACE = 0.5        # seconds between SIGTERM and SIGKILL
TRACEBACK_HEAD = 16384           # characters of a traceback kept in front
TRACEBACK_TAIL = 49152           # and at the end (the raise site)
MAX_FRAME_BYTES = 64 << 20       # the host's reply frame limit


def _clip_text(text, head=TRACEBACK_HEAD, tail=TRACEBACK_TAIL):
    """Keeps the head and tail of a long text with a marker between."""
    if len(text) <= head + tail:
        return text
    return "%s\n[... %d characters omitted ...]\n%s" % (
        text[:head], len(text) - head - tail, text[-tail:])


_encode_str = json.encoder.encode_basestring  # ensure_ascii=False escaping


# The members of a cell's reply frame, in order (docs/kernel_protocol.md
# section 4.1), and its JSON with the values left open.
_FRAME_KEYS = ("id", "status", "stdout", "stderr", "stdout_clipped",
               "stderr_clipped", "stdout_total", "stderr_total", "traceback",
               "execution_count", "exit_code")
_FRAME_JSON = ", ".join('"%s": %%s' % key for key in _FRAME_KEYS)
_FRAME_JSON = "{" + _FRAME_JSON + "}"
_JSON_BOOL = {True: "true", False: "false"}


def _dumps_frame(body):
    """A cell frame's JSON through one format string, or None when a value
    is not of the expected type."""
    (cell_id, status, out, err, out_clipped, err_clipped, out_total,
     err_total, trace, count, exit_code) = body.values()
    if (type(status) is not str or type(out) is not str
            or type(err) is not str or type(trace) is not str
            or type(out_total) is not int or type(err_total) is not int
            or type(count) is not int or type(out_clipped) is not bool
            or type(err_clipped) is not bool):
        return None
    if cell_id is None:
        cell_id = "null"
    elif type(cell_id) is str:
        cell_id = _encode_str(cell_id)
    else:
        return None
    if exit_code is None:
        exit_code = "null"
    elif type(exit_code) is int:
        exit_code = int.__repr__(exit_code)
    else:
        return None
    return _FRAME_JSON % (
        cell_id, _encode_str(status), _encode_str(out), _encode_str(err),
        _JSON_BOOL[out_clipped], _JSON_BOOL[err_clipped],
        int.__repr__(out_total), int.__repr__(err_total), _encode_str(trace),
        int.__repr__(count), exit_code)


def _dumps_body(body):
    """`json.dumps(body, ensure_ascii=False)` for a frame body: a flat dict
    of str, bool, int and None values (anything else goes through json).
    The per-cell frame is built on every cell, so it avoids the general
    encoder's set-up."""
    if len(body) == len(_FRAME_KEYS) and tuple(body) == _FRAME_KEYS:
        text = _dumps_frame(body)
        if text is not None:
            return text
    if (len(body) == len(_FRAME_KEYS) + 1
            and type(body.get("checkpoint")) is str):
        rest = dict(body)
        mark = rest.pop("checkpoint")
        if tuple(rest) == _FRAME_KEYS:
            text = _dumps_frame(rest)
            if text is not None:
                return text[:-1] + ', "checkpoint": ' + _encode_str(mark) \
                    + "}"
    parts = []
    for key, value in body.items():
        if value is None:
            text = "null"
        elif value is True:
            text = "true"
        elif value is False:
            text = "false"
        elif type(value) is str:
            text = _encode_str(value)
        elif type(value) is int:
            text = int.__repr__(value)
        else:
            text = json.dumps(value, ensure_ascii=False)
        parts.append(_encode_str(key) + ": " + text)
    return "{" + ", ".join(parts) + "}"


def _encode_body(body):
    """The frame body as UTF-8 bytes; lone surrogates become '?'."""
    text = _dumps_body(body)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace")


def _fit_frame(body, encode):
    """Returns the encoded body, halving the captured texts until it fits
    the host's frame limit (JSON escapes can make text grow sixfold)."""
    data = encode(body)
    while len(data) > MAX_FRAME_BYTES:
        body = dict(body)
        shrunk = False
        for key in ("stdout", "stderr", "traceback"):
            text = body.get(key)
            if isinstance(text, str) and len(text) > 1024:
                body[key] = text[:len(text) // 2]
                if key != "traceback":
                    body[key + "_clipped"] = True
                shrunk = True
        if not shrunk:
            break
        data = encode(body)
    return data


class CellStream(io.TextIOBase):
    """A text stream that keeps the first `limit` characters written to it.

    Stands in for sys.stdout / sys.stderr while a cell runs. Thread-safe:
    threads the cell started may print concurrently. `fileno()` reports the
    real descriptor so that code handing sys.stdout to a subprocess still
    works; that output then arrives as raw fd-level bytes.
    """

    def __init__(self, fd, limit):
        super().__init__()
        self._fd = fd
        self._limit = limit
        self._parts = []
        self._kept = 0
        self._total = 0
        self._lock = threading.Lock()
        self.buffer = _ByteSink(self)

    # -- io.TextIOBase ------------------------------------------------------

    @property
    def encoding(self):
        return "utf-8"

    @property
    def errors(self):
        return "strict"

    def readable(self):
        return False

    def writable(self):
        return True

    def isatty(self):
        return False

    def fileno(self):
        return self._fd

    def write(self, s):
        if self.closed:
            raise ValueError("I/O operation on closed file.")
        if not isinstance(s, str):
            raise TypeError("write() argument must be str, not %s"
                            % type(s).__name__)
        n = len(s)
        with self._lock:
            self._total += n
            room = self._limit - self._kept
            if room > 0:
                piece = s if n <= room else s[:room]
                self._parts.append(piece)
                self._kept += len(piece)
        return n

    def flush(self):
        if self.closed:
            raise ValueError("I/O operation on closed file.")

    # -- results ------------------------------------------------------------

    def value(self):
        with self._lock:
            text = "".join(self._parts)
            self._parts = [text]
            return text

    def total(self):
        with self._lock:
            return self._total

    def clipped(self):
        with self._lock:
            return self._total > self._kept

    def snapshot(self):
        """(text kept, whether text was dropped, characters written)."""
        with self._lock:
            text = "".join(self._parts)
            self._parts = [text]
            return text, self._total > self._kept, self._total

    def reset(self):
        """Empties the stream for another cell (Kernel._capture_stream)."""
        with self._lock:
            self._parts = []
            self._kept = 0
            self._total = 0


def _stream_refs(stream):
    """References to a capture stream and to its `buffer`, and whether
    anything holds a weak reference to either. Compared with the same
    figures of a stream nobody else holds (measured once, the same way)."""
    sink = stream.buffer
    return (sys.getrefcount(stream), sys.getrefcount(sink),
            weakref.getweakrefcount(stream) + weakref.getweakrefcount(sink))


class _CompileCache(object):
    """Code objects of recently run cell texts, keyed by the exact text.

    A code object does not depend on the globals it later runs in, and a
    cell's compilation depends only on its text (the runner's own
    compiler flags are fixed), so running a cached one is the same as
    compiling the text again, with one exception this cache rules out:
    compilation can emit warnings (SyntaxWarning for `x is 1`, invalid
    escape sequences), which a real interpreter prints on every run. A
    text is cached only after it was seen twice and a silent compilation
    with every warning enabled recorded none; that check runs between
    cells (`settle`, after the frame). Bounded in entries and text size.
    """

    MAX_ENTRIES = 64
    MAX_TEXT = 16384          # characters; longer cells are not cached

    def __init__(self):
        self._code = {}       # text -> code object (warning-free)
        self._seen = {}       # text -> None: compiled once, in order
        self._pending = None  # a text to check at the next settle()

    def compile(self, text):
        code = self._code.get(text)
        if code is not None:
            return code
        code = compile(text, "<cell>", "exec")
        if len(text) <= self.MAX_TEXT:
            if text in self._seen:
                self._pending = text
            else:
                self._seen[text] = None
                if len(self._seen) > self.MAX_ENTRIES:
                    del self._seen[next(iter(self._seen))]
        return code

    def settle(self):
        text, self._pending = self._pending, None
        if text is None:
            return
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                code = compile(text, "<cell>", "exec")
        except BaseException:
            return
        self._seen.pop(text, None)
        if caught:
            return
        self._code[text] = code
        if len(self._code) > self.MAX_ENTRIES:
            del self._code[next(iter(self._code))]


class _ByteSink(object):
    """`sys.stdout.buffer`: bytes are decoded as UTF-8 into the text stream."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, b):
        data = bytes(b)
        self._stream.write(data.decode("utf-8", "replace"))
        return len(data)

    def flush(self):
        pass

    def fileno(self):
        return self._stream.fileno()

    def isatty(self):
        return False

    def writable(self):
        return True

    @property
    def closed(self):
        return self._stream.closed


def _find_fflush():
    """C stdio's fflush, or False when ctypes cannot provide it."""
    try:
        import ctypes
        return ctypes.CDLL(None).fflush
    except Exception:
        return False


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except InterruptedError:
            continue
        view = view[n:]


def _utf8_safe(s):
    """Returns `s` with lone surrogates replaced so it encodes as UTF-8."""
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return s.encode("utf-8", "replace").decode("utf-8")


def _exit_code(code):
    if code is None:
        return 0
    if isinstance(code, int):
        return int(code)
    return 1


# The runner's own directory (the staging dir): checkpoint files and the
# checkpoint module live there.
_HERE = os.path.dirname(os.path.abspath(__file__))


def _is_plain_file_name(name):
    return (isinstance(name, str) and 0 < len(name) <= 128
            and "/" not in name and "\0" not in name
            and name not in (".", ".."))


def _is_open_fd(fd):
    try:
        os.get_inheritable(fd)   # fcntl(F_GETFD): EBADF when closed
        return True
    except OSError:
        return False


class Kernel(object):
    def __init__(self, sentinel, frame_fd, err_fd, cmd_file):
        self.sentinel = sentinel.encode("utf-8")
        self.frame_fd = frame_fd      # private dup of the original fd 1
        self.err_fd = err_fd          # private dup of the original fd 2
        self.cmd_file = cmd_file      # private reader of the original fd 0
        self.execution_count = 0
        self.stub_path = ""           # mibyan_tools, loaded again on request
        self.reload_tools = False     # set by parse_line for the next cell
        self.pid = os.getpid()
        self.main = types.ModuleType("__main__")
        self.main.__dict__["__builtins__"] = builtins
        self.globals = self.main.__dict__
        self.idle_out = CellStream(1, 0)
        self.idle_err = CellStream(2, 0)
        # The previous cell's capture streams, reused when nothing kept
        # them (_capture_stream), and the reference counts of a stream
        # nobody else holds.
        self._spare_streams = [None, None]
        # The next cell's capture streams, made ready between cells.
        self._next_streams = None
        probe = CellStream(1, 0)
        self._free_refs = _stream_refs(probe)
        del probe
        self._compiled = _CompileCache()
        self._fd_poller = None
        if hasattr(select, "poll"):
            self._fd_poller = select.poll()
            self._fd_poller.register(1, 0)
            self._fd_poller.register(2, 0)
        self._libc_fflush = None
        # Checkpoints (section 3.1): the request of the line being served,
        # and the module, loaded on first use.
        self.checkpoint_req = None
        self.restore_req = None
        self.op = None
        self._checkpointer = None
        self._ckpt_module = None
        # The running cell's id and capture streams, for the SIGTERM frame.
        self.current = None
        self._frame_lock = threading.Lock()

    # -- frames -------------------------------------------------------------

    def _flush_native(self):
        # Output buffered by the original Python streams or by C stdio must
        # leave before the frame so the host files it under this cell.
        for stream in (sys.__stdout__, sys.__stderr__):
            try:
                if stream is not None:
                    stream.flush()
            except Exception:
                pass
        if self._libc_fflush is None:
            self._libc_fflush = _find_fflush()
        if self._libc_fflush:
            try:
                self._libc_fflush(None)
            except Exception:
                pass

    def send_frame(self, body, flush=True):
        if flush:
            self._flush_native()
        encode = _encode_body
        try:
            data = _fit_frame(body, encode)
        except Exception as e:
            data = encode({
                "id": body.get("id"), "status": "error", "stdout": "",
                "stderr": "", "stdout_clipped": False,
                "stderr_clipped": False, "stdout_total": 0,
                "stderr_total": 0,
                "traceback": "mibyan kernel: cannot encode the reply: %r" % e,
                "execution_count": self.execution_count, "exit_code": 1})
        header = b"\n" + self.sentinel + b" " + str(len(data)).encode() + b"\n"
        with self._frame_lock:
            _write_all(self.frame_fd, header + data)

    def send_ready(self):
        """Announces that start-up finished; the host sends cells only
        after this frame (a wrapper script in front of the interpreter
        could otherwise swallow the first cell line)."""
        self.send_frame({"id": None, "status": "ready", "pid": self.pid,
                         "execution_count": 0})

    def send_killed(self):
        """Called by the watchdog thread when the host ends a cell (timeout
        or interrupt): ships what the running cell printed so far, so
        partial output is not lost with the process."""
        current = self.current
        if current is None:
            return
        cell_id, out, err = current
        self.send_frame({
            "id": cell_id, "status": "killed",
            "stdout": out.value(), "stderr": err.value(),
            "stdout_clipped": out.clipped(), "stderr_clipped": err.clipped(),
            "stdout_total": out.total(), "stderr_total": err.total(),
            "traceback": "", "execution_count": self.execution_count,
            "exit_code": None})

    def protocol_error(self, cell_id, reason):
        self.send_frame({
            "id": cell_id, "status": "protocol-error", "stdout": "",
            "stderr": "", "stdout_clipped": False, "stderr_clipped": False,
            "stdout_total": 0, "stderr_total": 0,
            "traceback": "Invalid cell request: " + reason,
            "execution_count": self.execution_count, "exit_code": None})

    # -- cells --------------------------------------------------------------

    def _restore_fds(self):
        # A previous cell may have closed fd 1 or 2; subprocesses of later
        # cells still deserve a place to write. One poll() tells for both
        # (POLLNVAL: not open).
        poller = self._fd_poller
        if poller is not None:
            try:
                closed = [fd for fd, ev in poller.poll(0)
                          if ev & select.POLLNVAL]
            except OSError:
                closed = [fd for fd in (1, 2) if not _is_open_fd(fd)]
        else:
            closed = [fd for fd in (1, 2) if not _is_open_fd(fd)]
        for fd in closed:
            try:
                os.dup2(self.frame_fd if fd == 1 else self.err_fd, fd,
                        inheritable=True)
            except OSError:
                pass

    def parse_line(self, raw):
        """Returns (id, code, timeout, error)."""
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            return None, None, None, "the line is not valid UTF-8"
        line = line.strip()
        if not line:
            return None, None, None, "empty line"
        try:
            req = json.loads(line)
        except ValueError as e:
            return None, None, None, "not JSON (%s)" % e
        if not isinstance(req, dict):
            return None, None, None, "expected a JSON object"
        cell_id = req.get("id")
        if not isinstance(cell_id, str) or not cell_id:
            return None, None, None, "'id' must be a non-empty string"
        self.checkpoint_req = None
        self.op = None
        op = req.get("op")
        if op is not None:
            return self._parse_op(cell_id, op, req)
        code = req.get("code")
        if not isinstance(code, str):
            return cell_id, None, None, "'code' must be a string"
        if "checkpoint" in req:
            error = self._parse_checkpoint(req.get("checkpoint"))
            if error is not None:
                return cell_id, None, None, error
        self.reload_tools = req.get("reload_tools") is True
        timeout = req.get("timeout")
        if timeout is not None:
            if (isinstance(timeout, bool)
                    or not isinstance(timeout, (int, float))
                    or not timeout > 0):
                return cell_id, None, None, \
                    "'timeout' must be a positive number"
        return cell_id, code, timeout, None

    def _parse_checkpoint(self, spec):
        """A cell's or op's "checkpoint" member (section 3.1); the error
        text or None."""
        if not isinstance(spec, dict):
            return "'checkpoint' must be an object"
        name = spec.get("file")
        max_bytes = spec.get("max_bytes", 0)
        timeout = spec.get("timeout", 5)
        if not _is_plain_file_name(name):
            return "'checkpoint.file' must be a plain file name"
        if (isinstance(max_bytes, bool) or not isinstance(max_bytes, int)
                or max_bytes < 0):
            return "'checkpoint.max_bytes' must be a non-negative integer"
        if (isinstance(timeout, bool)
                or not isinstance(timeout, (int, float)) or not timeout > 0):
            return "'checkpoint.timeout' must be a positive number"
        self.checkpoint_req = (name, max_bytes, float(timeout))
        return None

    def _parse_op(self, cell_id, op, req):
        if op == "checkpoint":
            error = self._parse_checkpoint(req.get("checkpoint"))
            if error is not None:
                return cell_id, None, None, error
        elif op == "restore":
            name = req.get("file")
            timeout = req.get("timeout", 30)
            if not _is_plain_file_name(name):
                return cell_id, None, None, \
                    "'file' must be a plain file name"
            if (isinstance(timeout, bool)
                    or not isinstance(timeout, (int, float))
                    or not timeout > 0):
                return cell_id, None, None, \
                    "'timeout' must be a positive number"
            self.restore_req = (name, float(timeout))
        else:
            return cell_id, None, None, "unknown 'op' %r" % (op,)
        self.op = op
        return cell_id, "", None, None

    def _checkpoints(self):
        """The checkpoint module, loaded by exact path on first use."""
        if self._checkpointer is None:
            import importlib.util
            path = os.path.join(_HERE, "mibyan_checkpoint.py")
            spec = importlib.util.spec_from_file_location(
                "_mibyan_checkpoint", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            self._ckpt_module = module
            self._checkpointer = module.Checkpointer(self.globals)
        return self._checkpointer

    def send_checkpoint(self, cell_id):
        """The checkpoint frame for a cell or an op that asked for one
        (section 3.1): written after the cell's own frame, so the cell's
        result is never held up by it."""
        name, max_bytes, timeout = self.checkpoint_req
        self.checkpoint_req = None
        body = {"id": cell_id, "status": "checkpoint",
                "execution_count": self.execution_count}
        try:
            ckpt = self._checkpoints()
            summary = ckpt.write(os.path.join(_HERE, name),
                                 self.execution_count, max_bytes, timeout)
            if summary["changed"]:
                body.update(summary)
                body["file"] = name
            else:
                body["changed"] = False   # the short frame of most cells
        except BaseException as e:
            body.update({"changed": False, "error": "%s: %s" % (
                type(e).__name__, e)})
        # No cell's output precedes it: nothing to flush first.
        self.send_frame(body, flush=False)

    def run_restore(self, cell_id):
        """Restores the checkpoint the host wrote (after checking its
        HMAC) into the namespace; one "restored" frame."""
        name, timeout = self.restore_req
        self.restore_req = None
        path = os.path.join(_HERE, name)
        # Output of unpickling code (between cells) is discarded.
        try:
            self._checkpoints()
            out = self._ckpt_module.restore(self.globals, path, timeout)
        except BaseException as e:
            out = {"restored": [], "not_restored": [],
                   "execution_count": None,
                   "error": "%s: %s" % (type(e).__name__, e)}
        try:
            os.unlink(path)
        except OSError:
            pass
        count = out.get("execution_count")
        if isinstance(count, int) and count > self.execution_count:
            self.execution_count = count
        # The restored values are the kernel's state now: the next
        # checkpoint compares against them.
        if self._checkpointer is not None and not out["error"]:
            try:
                self._checkpointer.collect(0, 5.0)
            except BaseException:
                pass
        self.send_frame({"id": cell_id, "status": "restored",
                         "restored": out["restored"],
                         "not_restored": out["not_restored"],
                         "error": out["error"],
                         "execution_count": self.execution_count})

    def _set_rpc_timeout(self, timeout):
        # The stub reads it per call; subprocesses inherit it.
        value = repr(float(timeout))
        if os.environ.get(ENV_RPC_TIMEOUT) != value:
            os.environ[ENV_RPC_TIMEOUT] = value

    def _capture_stream(self, slot, fd):
        """A fresh capture stream for fd 1 (slot 0) or 2 (slot 1): the
        previous cell's, emptied, when it is still open and nothing refers
        to it (a saved sys.stdout, a bound method, its buffer, a weak
        reference), so no one can tell it from a new one; else a new one."""
        old = self._spare_streams[slot]
        self._spare_streams[slot] = None
        if (old is not None and not old.closed
                and _stream_refs(old) == self._free_refs):
            old.reset()
            return old
        return CellStream(fd, CAPTURE_LIMIT)

    def _prepare_streams(self):
        return self._capture_stream(0, 1), self._capture_stream(1, 2)

    def between_cells(self):
        """Work for the next cell done once a frame is out, off the path
        from a cell line to its frame: fds 1 and 2 restored, the next
        cell's capture streams made ready, the compile cache's warning
        check."""
        self._restore_fds()
        self._next_streams = self._prepare_streams()
        self._compiled.settle()

    def _run_atexit(self):
        try:
            import atexit
            atexit._run_exitfuncs()
        except BaseException:
            pass

    def run_cell(self, cell_id, code, timeout):
        """Runs one cell and sends its frame. Returns the exit code when the
        cell ended the kernel, else None."""
        if timeout is not None:
            self._set_rpc_timeout(timeout)
        # The stub tags tool calls with the cell they belong to; threads
        # and subprocesses keep the id of the cell that started them.
        os.environ[ENV_RPC_CELL] = cell_id
        self.execution_count += 1
        out, err = self._next_streams or self._prepare_streams()
        self._next_streams = None
        sys.stdout, sys.stderr = out, err
        self.current = (cell_id, out, err)
        status, trace, exit_code = "ok", "", 0
        try:
            compiled = self._compiled.compile(code)
            exec(compiled, self.globals)
        except SystemExit as e:
            status = "exit"
            exit_code = _exit_code(e.code)
            trace = _clip_text("SystemExit: %r" % (e.code,))
            # A real interpreter runs atexit handlers on sys.exit(); run them
            # while output is still captured for this cell.
            self._run_atexit()
        except BaseException as e:
            status, exit_code = "error", 1
            trace = self._format_exception(e)
        finally:
            sys.stdout, sys.stderr = self.idle_out, self.idle_err
            self.current = None
        if os.getpid() != self.pid:
            self._end_forked_child(out, err, trace, exit_code)
        out_text, out_clipped, out_total = out.snapshot()
        err_text, err_clipped, err_total = err.snapshot()
        body = {
            "id": cell_id, "status": status,
            "stdout": out_text, "stderr": err_text,
            "stdout_clipped": out_clipped, "stderr_clipped": err_clipped,
            "stdout_total": out_total, "stderr_total": err_total,
            "traceback": trace, "execution_count": self.execution_count,
            "exit_code": exit_code}
        if self.checkpoint_req is not None and status in ("ok", "error"):
            # Section 3.1: in a small namespace "unchanged" costs next to
            # nothing to tell and is answered in this frame. Otherwise the
            # checkpoint (or the check) follows the frame, off the result's
            # path.
            ckpt = self._checkpointer
            if ckpt is not None and ckpt.quick_unchanged():
                self.checkpoint_req = None
                body["checkpoint"] = "unchanged"
            else:
                body["checkpoint"] = "follows"
        self.send_frame(body)
        self._spare_streams[0], self._spare_streams[1] = out, err
        return exit_code if status == "exit" else None

    def _end_forked_child(self, out, err, trace, exit_code):
        # A process forked by the cell fell out of the cell's code, as at the
        # end of a script. It must neither send a frame nor read cell lines:
        # its output goes out at fd level and it exits.
        for fd, text in ((1, out.value()), (2, err.value() + trace)):
            try:
                _write_all(fd, _utf8_safe(text).encode("utf-8"))
            except OSError:
                pass
        os._exit(exit_code & 0xFF)

    @staticmethod
    def _format_exception(e):
        try:
            tb = e.__traceback__
            # Drop the runner's own frame (the exec call) from the trace.
            if tb is not None and tb.tb_frame.f_code is \
                    Kernel.run_cell.__code__:
                tb = tb.tb_next
            return _clip_text(
                "".join(traceback.format_exception(type(e), e, tb)))
        except BaseException:
            return "%s: <exception could not be formatted>" % \
                type(e).__name__

    # -- main loop ----------------------------------------------------------

    def serve(self):
        while True:
            try:
                raw = self.cmd_file.readline()
            except (OSError, ValueError):
                raw = b""
            if not raw:
                return 0
            cell_id, code, timeout, error = self.parse_line(raw)
            if error is not None:
                self.protocol_error(cell_id, error)
                continue
            if self.op is not None:
                op, self.op = self.op, None
                if op == "restore":
                    self.run_restore(cell_id)
                else:
                    self.send_checkpoint(cell_id)
                continue
            if self.reload_tools:
                # The tool set changed: the module's contents are replaced
                # in place, so `import mibyan_tools` bindings of earlier
                # cells see the new set too.
                self.reload_tools = False
                _reload_stub(self.stub_path, self.err_fd)
            code_or_none = self.run_cell(cell_id, code, timeout)
            if code_or_none is not None:
                return code_or_none
            # The next cell's streams first: they are ready by the time the
            # host has the frame, the checkpoint after them.
            self.between_cells()
            if self.checkpoint_req is not None:
                self.send_checkpoint(cell_id)


# -- parent-death watchdog -------------------------------------------------

def _group_and_descendants():
    """Returns pids (other than ours) in our process group or below us.
    Linux /proc only; empty elsewhere."""
    me, group = os.getpid(), os.getpgrp()
    parent_of, targets = {}, set()
    try:
        names = os.listdir("/proc")
    except OSError:
        return targets
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) < 3:
            continue
        pid, ppid, pgrp = int(name), int(fields[1]), int(fields[2])
        parent_of[pid] = ppid
        if pgrp == group and pid != me:
            targets.add(pid)
    for pid in parent_of:
        seen, p = 0, parent_of.get(pid)
        while p is not None and p > 1 and seen < 64:
            if p == me:
                targets.add(pid)
                break
            p, seen = parent_of.get(p), seen + 1
    targets.discard(me)
    return targets


def _kill_everything():
    own_group = os.getpgrp() == os.getpid()
    targets = _group_and_descendants()
    for pid in targets:
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
    deadline = time.monotonic() + WATCHDOG_TERM_GRACE
    while targets and time.monotonic() < deadline:
        time.sleep(0.05)
        targets = {p for p in targets if _is_alive(p)}
    for pid in targets:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    if own_group:
        try:
            os.killpg(os.getpgrp(), signal.SIGKILL)
        except OSError:
            pass
    os._exit(137)


def _is_alive(pid):
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            stat = f.read()
        return stat[stat.rfind(b")") + 2:][:1] not in (b"Z", b"X")
    except OSError:
        try:
            os.kill(pid, 0)
            return True
        except OSError:
            return False


# The kernel, once constructed (read by the watchdog thread).
_KERNEL = [None]


def _watch_parent(fd):
    """Blocks on the watchdog pipe. End of file means the host died; a
    "K" byte means the host is ending the running cell (timeout,
    interrupt): the cell's output so far is shipped first. Both end the
    process group. A thread is used, not a signal handler, because the main
    thread may be stuck in C code that never returns to the interpreter."""
    while True:
        try:
            data = os.read(fd, 4096)
        except InterruptedError:
            continue
        except OSError:
            break
        if not data:
            break
        if b"K" in data:
            kernel = _KERNEL[0]
            if kernel is not None:
                try:
                    kernel.send_killed()
                except BaseException:
                    pass
            break
    _kill_everything()


def _start_watchdog(value):
    try:
        fd = int(value)
        os.fstat(fd)
    except (TypeError, ValueError, OSError):
        return False
    try:
        os.set_inheritable(fd, False)
    except OSError:
        pass
    t = threading.Thread(target=_watch_parent, args=(fd,),
                         name="mibyan-watchdog", daemon=True)
    t.start()
    return True


# -- start-up --------------------------------------------------------------

def _load_stub(path, err_fd):
    if not path:
        return
    try:
        import importlib.util
        spec = importlib.util.spec_from_file_location("mibyan_tools", path)
        if spec is None or spec.loader is None:
            raise ImportError("no loader for %r" % path)
        module = importlib.util.module_from_spec(spec)
        sys.modules["mibyan_tools"] = module
        spec.loader.exec_module(module)
    except BaseException as e:
        sys.modules.pop("mibyan_tools", None)
        msg = "mibyan kernel: cannot load mibyan_tools from %s: %r\n" % (
            path, e)
        try:
            _write_all(err_fd, msg.encode("utf-8", "replace"))
        except OSError:
            pass


def _reload_stub(path, err_fd):
    module = sys.modules.get("mibyan_tools")
    if module is None:
        _load_stub(path, err_fd)
        return
    try:
        import importlib.util
        spec = importlib.util.spec_from_file_location("mibyan_tools", path)
        if spec is None or spec.loader is None:
            raise ImportError("no loader for %r" % path)
        fresh = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(fresh)
    except BaseException as e:
        msg = "mibyan kernel: cannot reload mibyan_tools from %s: %r\n" % (
            path, e)
        try:
            _write_all(err_fd, msg.encode("utf-8", "replace"))
        except OSError:
            pass
        return
    keep = {"__name__", "__loader__", "__spec__", "__file__", "__package__"}
    for name in list(module.__dict__):
        if name not in keep:
            del module.__dict__[name]
    for name, value in fresh.__dict__.items():
        if name not in keep:
            module.__dict__[name] = value


def _read_sentinel(value):
    """Reads the reply sentinel from the inherited pipe named by `value`
    (until end of file) and closes it. The sentinel never travels in the
    environment, where a cell could read it from /proc/self/environ."""
    try:
        fd = int(value)
    except (TypeError, ValueError):
        return ""
    data = b""
    try:
        while len(data) <= SENTINEL_MAX:
            chunk = os.read(fd, SENTINEL_MAX + 1 - len(data))
            if not chunk:
                break
            data += chunk
    except OSError:
        return ""
    finally:
        try:
            os.close(fd)
        except OSError:
            pass
    if len(data) > SENTINEL_MAX:
        return ""
    return data.decode("utf-8", "replace").strip()


def main():
    env = os.environ
    sentinel = _read_sentinel(env.get(ENV_SENTINEL_FD))
    stub_path = env.get(ENV_STUB, "")
    watchdog = env.get(ENV_WATCHDOG_FD)
    for name in PRIVATE_ENV:
        env.pop(name, None)
    if not sentinel or any(c.isspace() for c in sentinel):
        sys.__stderr__.write("mibyan kernel: no valid sentinel on the pipe "
                             "named by %s\n" % ENV_SENTINEL_FD)
        return 2
    if watchdog is not None:
        _start_watchdog(watchdog)

    # Private descriptors: frames, runner diagnostics and cell requests stay
    # usable whatever a cell does to fds 0, 1 and 2 (os.dup is
    # non-inheritable, so children never see them).
    frame_fd = os.dup(1)
    err_fd = os.dup(2)
    cmd_fd = os.dup(0)
    # Cells must not consume request lines: input() sees end of file.
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    cmd_file = os.fdopen(cmd_fd, "rb")

    _load_stub(stub_path, err_fd)
    # Like an interactive interpreter: the working directory is importable.
    if sys.path and sys.path[0] == os.path.dirname(os.path.abspath(__file__)):
        sys.path[0] = ""
    sys.argv = [""]

    # Everything loaded so far (runner, stub, ctypes for fflush) lives as
    # long as the kernel: keep it out of every collection, so a cell's
    # collections traverse only the cell's own objects.
    fflush = _find_fflush()
    gc.freeze()
    kernel = Kernel(sentinel, frame_fd, err_fd, cmd_file)
    kernel.stub_path = stub_path
    kernel._libc_fflush = fflush
    sys.modules["__main__"] = kernel.main
    sys.stdout, sys.stderr = kernel.idle_out, kernel.idle_err
    _KERNEL[0] = kernel
    kernel.send_ready()
    code = kernel.serve()
    # Threads a cell left running must not keep a finished kernel alive.
    try:
        os.close(frame_fd)
    except OSError:
        pass
    os._exit(code & 0xFF)


if __name__ == "__main__":
    sys.exit(main())
