# File: kernels/_mibyan_ckpt_file.py
#
# Writing a checkpoint file (docs/kernel_protocol.md, section 3.1), format
# 2:
#
#   MAGIC2 (8 bytes) | records | header JSON | header length (4 bytes,
#   big-endian)
#
# Records first: a value is pickled straight into the file as it is
# checked, and the header, which needs the records' lengths, follows them.
# Format 1 files (MAGIC | header length | header JSON | records) are still
# read (kernels/_mibyan_ckpt_restore.py).
#
# The header names the Python version and pickle protocol that wrote it,
# the kernel's execution count, the modules to import again (name ->
# module), aliases (a name bound to the same object as an earlier name),
# the values (name, type, the byte lengths of their records: the pickle,
# then its out-of-band buffers) in the order they are restored, and what
# was not saved (name, type, reason). Records follow in that order.
#
# Also here: the checkpointer's cache entries (_entry), which keep each
# value's pickle and its piece of the header. Loaded by
# kernels/mibyan_checkpoint.py from its own directory. Standard library
# only; Python >= 3.8. Thread: one writer per file.

import json
import os
import pickle
import sys

from _mibyan_ckpt_common import _type_name
from _mibyan_ckpt_snapshots import _immutable

MAGIC = b"MIBYANCK"           # format 1: header first (read only)
MAGIC2 = b"MIBYANC2"          # format 2: records first, header last
FORMAT = 2
DIRECT_WRITE = 64 << 10       # pieces at least this large skip the buffer
PROTOCOL = 5 if pickle.HIGHEST_PROTOCOL >= 5 else pickle.HIGHEST_PROTOCOL
MAX_HEADER = 64 << 20
WRITE_CHUNK = 4 << 20            # bytes per write() of a large record


def _no_sink(entry):
    pass


class _Tee(object):
    """The pickler's file: each frame is kept and written."""
    __slots__ = ("keep", "put")

    def __init__(self, keep, put):
        self.keep = keep
        self.put = put

    def write(self, b):
        self.keep(b)
        self.put(b)
        return len(b)


def _header(execution_count, modules, aliases, values, not_saved):
    """The header JSON (bytes). The values' entries are serialised once
    per value (the entry's sixth element) and spliced in."""
    header = {
        "format": FORMAT,
        "python": list(sys.version_info[:3]),
        "pickle_protocol": PROTOCOL,
        "execution_count": execution_count,
        "modules": modules,
        "aliases": aliases,
        "values": [],
        "not_saved": not_saved,
    }
    head = json.dumps(header, separators=(",", ":"))
    marker = '"values":[]'
    at = head.index(marker) + len(marker) - 1
    return (head[:at] + ",".join([v[6] for v in values])
            + head[at:]).encode("utf-8")


class _Sink(object):
    """The checkpoint file being written. Small pieces are gathered into
    WRITE_CHUNK writes; pieces of DIRECT_WRITE bytes or more (the
    pickler's frames, large records) go to the file as they are. `pos`
    counts every byte accepted."""

    def __init__(self, path):
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
                          0o600)
        self.pending = []
        self.pending_size = 0
        self.pos = 0
        self.put(MAGIC2)

    def put(self, piece):
        n = piece.nbytes if isinstance(piece, memoryview) else len(piece)
        self.pos += n
        if n >= DIRECT_WRITE:
            if self.pending:
                self.flush()
            _write(self.fd, piece)
            return
        self.pending.append(piece)
        self.pending_size += n
        if self.pending_size >= WRITE_CHUNK:
            self.flush()

    def put_entry(self, entry):
        data = entry[3]
        if type(data) is tuple:
            for piece in data:
                self.put(piece)
        else:
            self.put(data)
        for raw in entry[4]:
            self.put(raw)

    def pickle(self, value, buffer_callback):
        """Pickles `value` into the file; returns its pickle (bytes), kept
        for the next checkpoint."""
        chunks = []
        pickle.Pickler(_Tee(chunks.append, self.put), PROTOCOL,
                       buffer_callback=buffer_callback).dump(value)
        # Kept as the frames (a tuple): joining them would copy the whole
        # pickle into fresh memory once more.
        return chunks[0] if len(chunks) == 1 and type(chunks[0]) is bytes \
            else tuple(chunks)

    def flush(self):
        if self.pending:
            data = self.pending[0] if len(self.pending) == 1 \
                else b"".join(self.pending)
            self.pending, self.pending_size = [], 0
            _write(self.fd, data)

    def rewind(self, pos):
        """Drops everything after byte `pos` (a value that failed half
        way)."""
        self.flush()
        os.ftruncate(self.fd, pos)
        os.lseek(self.fd, pos, os.SEEK_SET)
        self.pos = pos

    def close(self):
        if self.fd >= 0:
            try:
                self.flush()
            finally:
                os.close(self.fd)
                self.fd = -1


def _entry(name, value, data, bufs, watch):
    """A cache entry: (value, immutable, type name, pickle, buffers, size,
    header JSON, name, identity snapshot or None)."""
    tname = _type_name(value)
    n = _pickle_size(data)
    size = n + sum([len(b) for b in bufs])
    head = json.dumps({"name": name, "type": tname,
                       "records": [n] + [len(b) for b in bufs]},
                      separators=(",", ":"))
    return (value, _immutable(value), tname, data, bufs, size, head, name,
            watch)


def _pickle_size(data):
    """Bytes of a kept pickle: one bytes object or a tuple of frames."""
    if type(data) is tuple:
        return sum([len(piece) for piece in data])
    return len(data)


def _same_pickle(fresh, data):
    """Whether `fresh` (bytes) is the kept pickle `data` (bytes, or a
    tuple of frames, compared in place)."""
    if type(data) is not tuple:
        return fresh == data
    pos = 0
    for piece in data:
        if not fresh.startswith(piece, pos):
            return False
        pos += len(piece)
    return pos == len(fresh)


def _write(fd, data):
    view = memoryview(data).cast("B")
    n = len(view)
    while view:
        try:
            k = os.write(fd, view[:WRITE_CHUNK])
        except InterruptedError:
            continue
        view = view[k:]
    return n
