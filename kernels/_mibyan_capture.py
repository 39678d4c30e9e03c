# File: kernels/_mibyan_capture.py
#
# Capture of a cell's Python-level output: the streams that stand in for
# sys.stdout and sys.stderr while a cell runs (docs/kernel_protocol.md,
# section 4.1: stdout, stdout_clipped, stdout_total, ...). Loaded by the
# runner (kernels/mibyan_kernel_runner.py) from its own directory at
# start-up. Standard library only; Python >= 3.8.
#
# Fd-level output (subprocesses, os.write) is not captured here: it goes
# to fds 1 and 2 and the host reads it from the pipes.

import io
import sys
import threading
import weakref

CAPTURE_LIMIT = 5000000          # characters kept per stream per cell


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
        """Empties the stream for another cell (CellRunner._capture_stream,
        kernels/_mibyan_cells.py)."""
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
