# File: kernels/_mibyan_frames.py
#
# The kernel runner's reply frames (docs/kernel_protocol.md, section 4):
# a frame body encoded as UTF-8 JSON, fitted to the host's frame limit, and
# written as "\n" SENTINEL " " <body byte length> "\n" <body> to the
# runner's private duplicate of fd 1. Loaded by the runner
# (kernels/mibyan_kernel_runner.py) from its own directory at start-up.
# Standard library only; Python >= 3.8.
#
# FrameWriter is a part of the runner's Kernel (kernels/_mibyan_kernel.py)
# and uses its attributes `sentinel` (bytes), `frame_fd`, `_frame_lock`,
# `_libc_fflush`, `execution_count`, `pid` and `current`. send_frame is
# thread-safe (the watchdog thread sends the "killed" frame): a frame is
# written whole under `_frame_lock`, so frames never interleave.

import json
import os
import sys

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


class FrameWriter(object):
    """Sends the runner's frames (a part of Kernel)."""

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
