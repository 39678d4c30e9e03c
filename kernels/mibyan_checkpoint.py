# File: kernels/mibyan_checkpoint.py
#
# Checkpoints of a session kernel's user namespace (docs/kernel_protocol.md,
# section 3.1; docs/execute_code.md, "Checkpoints"). Loaded by the runner
# (kernels/mibyan_kernel_runner.py) from its own directory, by exact path,
# the first time the host asks for a checkpoint or a restore. Standard
# library only; Python >= 3.8.
#
# A checkpoint file (format 2) is
#
#   MAGIC2 (8 bytes) | records | header JSON | header length (4 bytes,
#   big-endian)
#
# Records first: a value is pickled straight into the file as it is
# checked, and the header, which needs the records' lengths, follows them.
# Format 1 files (MAGIC | header length | header JSON | records) are still
# read.
#
# The header names the Python version and pickle protocol that wrote it,
# the kernel's execution count, the modules to import again (name ->
# module), aliases (a name bound to the same object as an earlier name),
# the values (name, type, the byte lengths of their records: the pickle,
# then its out-of-band buffers) in the order they are restored, and what
# was not saved (name, type, reason). Records follow in that order.
#
# The runner never trusts the file's origin: the host verifies its HMAC
# before it writes a restore file (the key never enters the sandbox). The
# checks here (magic, format, versions, lengths) report damage by name
# instead of failing the whole restore.
#
# Thread: the runner's main thread only (the timeout uses SIGALRM).

import datetime
import importlib
import json
import mmap
import operator
import os
import pickle
import re
import signal
import struct
import sys
import time
import types

MAGIC = b"MIBYANCK"           # format 1: header first (read only)
MAGIC2 = b"MIBYANC2"          # format 2: records first, header last
FORMAT = 2
DIRECT_WRITE = 64 << 10       # pieces at least this large skip the buffer
PROTOCOL = 5 if pickle.HIGHEST_PROTOCOL >= 5 else pickle.HIGHEST_PROTOCOL
MAX_HEADER = 64 << 20
WRITE_CHUNK = 4 << 20            # bytes per write() of a large record
# What the runner checks before a cell's frame to answer "unchanged" in it
# (Checkpointer.quick_unchanged): at most QUICK_ITEMS bindings and
# container slots together, compared by identity in C (a few microseconds)
# and no value that only its pickle can tell. Past that the check runs
# after the frame, off the result's path.
QUICK_ITEMS = 256
# Container slots one value's snapshot may hold (memory: a pointer each);
# a larger value is compared by its pickle instead.
WATCH_LIMIT = 1 << 21

# Values whose identity says everything: immutable and made only of
# immutable parts (tuples and frozensets are checked to a small depth).
_ATOMIC = (int, float, complex, str, bytes, bool, type(None), range,
           type(Ellipsis), re.Pattern,
           datetime.date, datetime.datetime, datetime.time,
           datetime.timedelta, datetime.timezone)
_ATOMIC_SET = frozenset(_ATOMIC)
# Containers an identity snapshot covers (exact types: a subclass may
# pickle attributes or state a snapshot does not see).
_CONTAINERS = frozenset((list, dict, set, bytearray, tuple, frozenset))


def _immutable(value, depth=0):
    t = type(value)
    if t in _ATOMIC:
        return True
    if (t is tuple or t is frozenset) and depth < 3 and len(value) <= 64:
        return all(_immutable(v, depth + 1) for v in value)
    return False


def _watch(value, limit=WATCH_LIMIT):
    """An identity snapshot of a value that can change in place: a list of
    (container, items, values) taken before the value is pickled, or None
    when some part of it can only be compared by pickling.

    It covers exact lists, dicts, sets and bytearrays, and tuples and
    frozensets of them, down to immutable atoms (_ATOMIC). While every
    container holds the very same objects in the same order as in its
    snapshot (_holds), the value pickles to the same bytes: atoms cannot
    change, and every container is in the snapshot. Taken before the
    pickle, so a thread that changes the value in between makes the
    snapshot differ (the next pass pickles again) and never hides a
    change."""
    watches = []
    seen = set()
    stack = [value]
    total = 0
    atomic = _ATOMIC_SET
    containers = _CONTAINERS
    while stack:
        v = stack.pop()
        key = id(v)
        if key in seen:
            continue
        seen.add(key)
        t = type(v)
        if t is list or t is set:
            items = list(v)
            watches.append((v, items, None))
        elif t is dict:
            keys = list(v)
            values = list(v.values())
            watches.append((v, keys, values))
            items = keys + values
        elif t is tuple or t is frozenset:
            # Immutable itself: its parent's snapshot holds its identity;
            # only the containers inside it can change.
            items = v
        elif t is bytearray:
            watches.append((v, bytes(v), False))
            total += len(v) >> 6
            continue
        else:
            return None
        total += len(items)
        if total > limit:
            return None
        kinds = set(map(type, items))
        if kinds <= atomic:
            continue
        if not kinds <= containers | atomic:
            return None
        stack.extend([x for x in items if type(x) not in atomic])
    return watches


def _holds(watches):
    """True when every container in the snapshot holds the same objects
    in the same order as when the snapshot was taken."""
    is_ = operator.is_
    try:
        for c, items, values in watches:
            if values is False:                  # a bytearray: its bytes
                if c != items:
                    return False
            elif (len(c) != len(items) or not all(map(is_, c, items))
                  or (values is not None
                      and not all(map(is_, c.values(), values)))):
                return False
        return True
    except RuntimeError:
        return False     # changed size while compared (another thread)


def _type_name(value):
    t = type(value)
    module = getattr(t, "__module__", "")
    if module in ("builtins", "__main__", None, ""):
        return t.__qualname__
    return "%s.%s" % (module, t.__qualname__)


class CheckpointTimeout(BaseException):
    """Raised in the main thread when pickling one value takes too long
    (a __reduce__ that hangs). BaseException: user code that catches
    Exception must not swallow it."""


class _Deadline(object):
    """One periodic SIGALRM for a whole pass; the handler raises only when
    the same value (`current`, set by the caller around each value) has
    been worked on for `seconds` (up to a quarter more). Two system calls
    per pass and no clock reads per value. The cell's own SIGALRM handler
    and timer are put back afterwards."""

    def __init__(self, seconds):
        self.seconds = seconds
        self.current = None
        self._seen = None
        self._stuck = 0.0
        self._tick = max(0.05, (seconds or 0) / 4.0)
        self._old = None
        self._old_timer = (0.0, 0.0)
        self.armed = False

    def _fire(self, signum, frame):
        cur = self.current
        if cur is None or cur is not self._seen:
            self._seen = cur
            self._stuck = 0.0
            return
        self._stuck += self._tick
        if self._stuck >= self.seconds:
            self.current = self._seen = None
            self._stuck = 0.0
            raise CheckpointTimeout()

    def arm(self):
        if self.armed or not self.seconds or self.seconds <= 0:
            return
        try:
            self._old = signal.signal(signal.SIGALRM, self._fire)
            self._old_timer = signal.setitimer(signal.ITIMER_REAL,
                                               self._tick, self._tick)
            self.armed = True
        except (ValueError, OSError, AttributeError):
            self.armed = False   # not the main thread, or no SIGALRM

    def disarm(self):
        if not self.armed:
            return
        self.armed = False
        self.current = None
        try:
            signal.setitimer(signal.ITIMER_REAL, *self._old_timer)
            signal.signal(signal.SIGALRM, self._old
                          if self._old is not None else signal.SIG_DFL)
        except (ValueError, OSError):
            pass


class Checkpointer(object):
    """Keeps the last checkpoint's pickles by name, so only changed names
    are pickled into the next one.

    `strategy` says how a name is known to be unchanged:
      "identity"  the same object as last time and either immutable
                  throughout or a container whose identity snapshot
                  (_watch) still holds: no pickling at all; anything else
                  is pickled and compared with its last pickle;
      "pickle"    every value is pickled and compared.
    bench/checkpoint_bench.py measures both; "identity" is the default.
    """

    def __init__(self, namespace, strategy="identity"):
        self.ns = namespace
        self.strategy = strategy
        # name -> cache entry (_entry)
        self.cache = {}
        # name -> (value, not-saved entry): values that could not be pickled
        self.failed = {}
        self.last_names = None
        self.last_not_saved = None
        # The last pass, for the "unchanged" shortcut (_unchanged): the
        # namespace's keys and values, the snapshots of its containers, the
        # values no snapshot covers with their pickles, and their sizes.
        self._fast_keys = None
        self._fast_vals = None
        self._fast_watches = ()
        self._fast_pickled = ()
        self._fast_quick = False
        # name -> (value, pickle, buffers) made by _unchanged in this pass,
        # so the full pass that follows does not pickle them again.
        self._probed = {}
        self._last_values = self._last_modules = self._last_aliases = None
        self._last_size = 0

    # -- taking -------------------------------------------------------------

    def collect(self, max_bytes, timeout, sink=None, checked=False):
        """Brings the cache up to date with the namespace. Returns
        (changed, values, modules, aliases, not_saved, size, dropped):
        `values` is the cache entries (_entry) in namespace order, kept
        ones only; `dropped` says whether values were left out over
        `max_bytes`. With a `sink` (_Sink) every value's records go into
        it as the pass goes, new pickles straight from the pickler, in the
        order of `values` plus any left out. `checked`: the caller ran
        _unchanged already. The loop is the per-cell cost of checkpoints:
        kept to plain operations."""
        ns = self.ns
        identity = self.strategy == "identity"
        if identity and not checked and self._unchanged(timeout):
            return (False, self._last_values, self._last_modules,
                    self._last_aliases, self.last_not_saved, self._last_size,
                    False)
        probed = self._probed
        self._probed = {}
        cache_get = self.cache.get
        failed_get = self.failed.get
        deadline = _Deadline(timeout)
        dumps = pickle.dumps
        module_type = types.ModuleType
        function_type = types.FunctionType
        bufs = []
        on_buffer = bufs.append
        put = sink.put_entry if sink is not None else _no_sink
        atomic = _ATOMIC_SET
        containers = _CONTAINERS
        changed = False
        values, modules, aliases, not_saved = [], {}, {}, []
        first_of = {}
        fresh = {}
        fresh_failed = {}
        try:
            for name, value in list(ns.items()):
                if name[:2] == "__" and name[-2:] == "__":
                    continue
                old = cache_get(name)
                if identity and old is not None and old[0] is value \
                        and old[1]:
                    # The same immutable object: unchanged, no pickling.
                    fresh[name] = old
                    values.append(old)
                    put(old)
                    continue
                t = type(value)
                if t is module_type or isinstance(value, module_type):
                    modname = getattr(value, "__name__", None)
                    if isinstance(modname, str) and modname != "__main__":
                        modules[name] = modname
                        continue
                    not_saved.append({"name": name, "type": "module",
                                      "reason": "the kernel's own namespace "
                                                "module cannot be saved"})
                    continue
                if value is ns:
                    not_saved.append({"name": name, "type": "dict",
                                      "reason": "it is the kernel's namespace "
                                                "itself (globals())"})
                    continue
                key = id(value)
                if key in first_of and not _immutable(value):
                    aliases[name] = first_of[key]
                    continue
                failed = failed_get(name)
                if failed is not None and failed[0] is value:
                    # The same object failed before: not tried again until
                    # the name is bound to another object (a __reduce__
                    # that hangs would cost its timeout on every cell).
                    fresh_failed[name] = failed
                    not_saved.append(failed[1])
                    continue
                if identity and old is not None and old[0] is value \
                        and old[8] is not None and _holds(old[8]):
                    # The same container holding the same objects.
                    fresh[name] = old
                    first_of[key] = name
                    values.append(old)
                    put(old)
                    continue
                if t is function_type or isinstance(value, type):
                    reason = self._unsaveable(value)
                    if reason is not None:
                        not_saved.append({"name": name,
                                          "type": _type_name(value),
                                          "reason": reason})
                        fresh_failed[name] = (value, not_saved[-1])
                        continue
                reason = None
                done = probed.get(name)
                written = False
                if done is not None and done[0] is value:
                    # Pickled by _unchanged in this pass (not snapshot-
                    # covered: no snapshot to take).
                    watch, data, raws = None, done[1], done[2]
                else:
                    # The snapshot comes first: a change made meanwhile (by
                    # another thread) then shows in the next pass.
                    watch = None if not identity or _immutable(value) \
                        else _watch(value)
                    if not deadline.armed:
                        deadline.arm()
                    start = sink.pos if sink is not None else 0
                    try:
                        deadline.current = name
                        if sink is None or t in atomic or (
                                t in containers and len(value) < 4096):
                            # Small (or no file): one buffer is cheaper.
                            data = dumps(value, PROTOCOL,
                                         buffer_callback=on_buffer)
                        else:
                            # Straight into the file, frame by frame: no
                            # growing output buffer, no second copy.
                            data = sink.pickle(value, on_buffer)
                            written = True
                        deadline.current = None
                    except CheckpointTimeout:
                        reason = ("pickling took longer than %gs (a "
                                  "__reduce__ or __getstate__ that hangs)"
                                  % timeout)
                    except RecursionError:
                        reason = "nested too deeply to pickle"
                    except Exception as e:
                        reason = _reason(e)
                    if reason is not None:
                        deadline.current = None
                        del bufs[:]
                        if sink is not None:
                            sink.rewind(start)
                        not_saved.append({"name": name,
                                          "type": _type_name(value),
                                          "reason": reason})
                        fresh_failed[name] = (value, not_saved[-1])
                        continue
                    if bufs:
                        # Copies: a view would follow the live buffer, and
                        # a change made to it in place would compare equal
                        # with itself next time.
                        raws = [(b.raw() if hasattr(b, "raw")
                                 else memoryview(b)).tobytes() for b in bufs]
                        del bufs[:]
                        if written:
                            for raw in raws:
                                sink.put(raw)
                    else:
                        raws = ()
                if old is None or old[3] != data or (
                        (old[4] or raws) and (
                            len(old[4]) != len(raws)
                            or any(a != b for a, b in zip(old[4], raws)))):
                    changed = True
                    entry = _entry(name, value, data, raws, watch)
                else:
                    # The same bytes: the old record is kept (a new object
                    # or a new snapshot).
                    entry = (value, _immutable(value)) + old[2:8] + (watch,)
                fresh[name] = entry
                if key not in first_of:
                    first_of[key] = name
                values.append(entry)
                if not written:
                    put(entry)
        finally:
            deadline.disarm()
        self.cache = fresh
        self.failed = fresh_failed
        # Over the limit: the largest values are left out and listed.
        size = sum([v[5] for v in values])
        dropped = False
        if max_bytes and size > max_bytes:
            order = sorted(range(len(values)),
                           key=lambda i: values[i][5], reverse=True)
            out = set()
            for i in order:
                if size <= max_bytes:
                    break
                n = values[i][5]
                size -= n
                out.add(i)
                not_saved.append({
                    "name": values[i][7], "type": values[i][2],
                    "reason": "left out: %d bytes pickled; the session's "
                              "checkpoint limit is %d bytes "
                              "(code_execution.checkpoint_max_mb)"
                              % (n, max_bytes)})
            values = [v for i, v in enumerate(values) if i not in out]
            dropped = True
            kept = {v[7] for v in values}
            aliases = {a: t for a, t in aliases.items() if t in kept}
        names = (tuple([v[7] for v in values]),
                 tuple(sorted(modules.items())),
                 tuple(sorted(aliases.items())))
        if names != self.last_names or not_saved != self.last_not_saved:
            changed = True
        self.last_names = names
        self.last_not_saved = not_saved
        self._remember(values)
        self._last_values, self._last_modules = values, modules
        self._last_aliases, self._last_size = aliases, size
        return changed, values, modules, aliases, not_saved, size, dropped

    def _remember(self, values):
        """Keeps what the next pass's shortcut (_unchanged) compares: the
        bindings, the snapshots of every saved container, and the values
        no snapshot covers with their pickles. Values left out over the
        limit, aliases and values that failed are held by the bindings:
        rebinding them shows, changing them in place changes nothing that
        is saved."""
        ns = self.ns
        self._fast_keys = list(ns)
        self._fast_vals = list(ns.values())
        watches, pickled = [], []
        for v in self.cache.values():
            if v[1]:
                continue
            if v[8] is not None:
                watches.extend(v[8])
            else:
                pickled.append((v[0], v[7], v[3], v[4]))
        self._fast_watches = watches
        self._fast_pickled = pickled
        slots = len(self._fast_keys)
        for c, items, _ in watches:
            slots += len(items)
        self._fast_quick = slots <= QUICK_ITEMS and not pickled

    def quick_unchanged(self):
        """The runner's check before a cell's frame: True when the
        namespace is certainly what the last checkpoint holds and finding
        that out costs next to nothing (QUICK_ITEMS). False means "not
        known": the checkpoint is then taken after the frame."""
        if self.strategy != "identity" or not self._fast_quick:
            return False
        return self._unchanged(None)

    def _unchanged(self, timeout):
        """True when every name is bound to the same object as at the last
        pass, every container's snapshot holds and every other value that
        can change in place pickles the same: the namespace is what the
        last checkpoint holds. Most cells land here, so the checks run in
        C (list comparisons, map over operator.is_)."""
        keys = self._fast_keys
        self._probed = {}
        if keys is None:
            return False
        ns = self.ns
        if len(ns) != len(keys) or list(ns) != keys:
            return False
        if not all(map(operator.is_, ns.values(), self._fast_vals)):
            return False
        if self._fast_watches and not _holds(self._fast_watches):
            return False
        pickled = self._fast_pickled
        if not pickled:
            return True
        deadline = _Deadline(timeout)
        if timeout:
            deadline.arm()
        dumps = pickle.dumps
        bufs = []
        probed = self._probed
        same = True
        try:
            for value, name, data, raws in pickled:
                deadline.current = name
                if raws:
                    return False      # out-of-band buffers: the full pass
                fresh = dumps(value, PROTOCOL, buffer_callback=bufs.append)
                if bufs:
                    return False
                if not _same_pickle(fresh, data):
                    # Kept for the full pass, which must not pickle a large
                    # value twice; the remaining values it checks itself.
                    probed[name] = (value, fresh, ())
                    same = False
                    break
            return same
        except BaseException:
            return False              # the full pass reports it
        finally:
            deadline.disarm()

    def _unsaveable(self, value):
        t = type(value)
        if t in (types.FunctionType, types.LambdaType) or isinstance(
                value, type):
            if getattr(value, "__module__", None) == "__main__":
                what = "lambda" if getattr(value, "__name__", "") == \
                    "<lambda>" else ("class" if isinstance(value, type)
                                     else "function")
                return ("a %s defined in a cell: its code is not saved; run "
                        "its definition again" % what)
        return None

    def write(self, path, execution_count, max_bytes, timeout):
        """Writes a checkpoint to `path` when the namespace changed since
        the last one (format 2: MAGIC2, the records, the header, its
        length). Returns the summary for the host's frame."""
        started = time.monotonic()
        summary = {"changed": False, "bytes": 0}
        if self.strategy == "identity" and self._unchanged(timeout):
            summary.update({"names": len(self._last_values or ()),
                            "modules": len(self._last_modules or ()),
                            "aliases": len(self._last_aliases or ()),
                            "not_saved": self.last_not_saved or []})
            summary["seconds"] = time.monotonic() - started
            return summary
        sink = _Sink(path)
        keep = False
        try:
            changed, values, modules, aliases, not_saved, size, dropped = \
                self.collect(max_bytes, timeout, sink, checked=True)
            summary.update({"changed": changed, "names": len(values),
                            "modules": len(modules),
                            "aliases": len(aliases),
                            "not_saved": not_saved})
            if changed:
                head = _header(execution_count, modules, aliases, values,
                               not_saved)
                if dropped:
                    # Values left out over the limit were written already:
                    # the file is made again from the kept records.
                    sink.close()
                    sink = _Sink(path)
                    for v in values:
                        sink.put_entry(v)
                sink.put(head)
                sink.put(struct.pack(">I", len(head)))
                sink.flush()
                summary["bytes"] = sink.pos
                keep = True
        finally:
            sink.close()
            if not keep:
                try:
                    os.unlink(path)
                except OSError:
                    pass
        summary["seconds"] = time.monotonic() - started
        return summary


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


def _reason(e):
    text = "%s: %s" % (type(e).__name__, e)
    return text if len(text) <= 300 else text[:297] + "..."


# -- restoring ---------------------------------------------------------------

def read_header(data):
    """(header, offset of the first record, offset past the last) or
    raises ValueError with the reason the whole checkpoint is refused.
    Format 2 (MAGIC2) has the header last, format 1 (MAGIC) first."""
    if len(data) >= len(MAGIC2) + 4 and data[:len(MAGIC2)] == MAGIC2:
        fmt = 2
        (n,) = struct.unpack(">I", data[len(data) - 4:])
        start = len(MAGIC2)
        if n > MAX_HEADER or start + n + 4 > len(data):
            raise ValueError("the checkpoint is truncated (its header is "
                             "cut off)")
        head_at = len(data) - 4 - n
        records_end = head_at
    else:
        fmt = 1
        if len(data) < len(MAGIC) + 4 or data[:len(MAGIC)] != MAGIC:
            raise ValueError("not a Mibyan kernel checkpoint (bad magic)")
        (n,) = struct.unpack(">I", data[len(MAGIC):len(MAGIC) + 4])
        head_at = len(MAGIC) + 4
        if n > MAX_HEADER or head_at + n > len(data):
            raise ValueError("the checkpoint is truncated (its header is "
                             "cut off)")
        start = head_at + n
        records_end = len(data)
    try:
        header = json.loads(bytes(data[head_at:head_at + n]).decode("utf-8"))
    except ValueError as e:
        raise ValueError("the checkpoint's header is not JSON (%s)" % e)
    if not isinstance(header, dict) or header.get("format") != fmt:
        raise ValueError("unknown checkpoint format %r" % (
            header.get("format") if isinstance(header, dict) else None,))
    py = header.get("python")
    if (not isinstance(py, list) or len(py) < 2
            or not all(isinstance(x, int) for x in py[:2])):
        raise ValueError("the checkpoint does not say which Python wrote it")
    if tuple(py[:2]) > tuple(sys.version_info[:2]):
        raise ValueError(
            "the checkpoint was written by Python %d.%d; this kernel runs "
            "%d.%d, which may not read its pickles"
            % (py[0], py[1], sys.version_info[0], sys.version_info[1]))
    proto = header.get("pickle_protocol")
    if not isinstance(proto, int) or proto > pickle.HIGHEST_PROTOCOL:
        raise ValueError("the checkpoint uses pickle protocol %r; this "
                         "kernel reads up to %d"
                         % (proto, pickle.HIGHEST_PROTOCOL))
    return header, start, records_end


def restore(namespace, path, timeout):
    """Restores a checkpoint file into `namespace`: modules imported
    again, then the values in the order they were saved (the order they
    were defined in), then the aliases. Returns {"restored": [names],
    "not_restored": [{name, type, reason}], "execution_count": n or None,
    "error": reason the whole checkpoint was refused or ""}."""
    out = {"restored": [], "not_restored": [], "execution_count": None,
           "error": ""}
    try:
        # Mapped, not read: one copy less for a large checkpoint (values
        # that keep out-of-band buffers keep the mapping alive).
        with open(path, "rb") as f:
            try:
                data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            except (ValueError, OSError):
                data = f.read()       # empty file, or no mmap here
    except OSError as e:
        out["error"] = "cannot read the checkpoint: %s" % e
        return out
    view = memoryview(data)
    try:
        header, pos, records_end = read_header(view)
    except ValueError as e:
        out["error"] = str(e)
        return out
    restored, lost = out["restored"], out["not_restored"]
    count = header.get("execution_count")
    out["execution_count"] = count if isinstance(count, int) else None
    for item in header.get("not_saved") or []:
        if isinstance(item, dict):
            lost.append({"name": str(item.get("name")),
                         "type": str(item.get("type")),
                         "reason": "not saved: " + str(item.get("reason"))})
    modules = header.get("modules") or {}
    for name, modname in (modules.items() if isinstance(modules, dict)
                          else ()):
        try:
            namespace[name] = importlib.import_module(str(modname))
            restored.append(name)
        except BaseException as e:
            lost.append({"name": name, "type": "module",
                         "reason": "import %s failed: %s" % (modname,
                                                             _reason(e))})
    deadline = _Deadline(timeout)
    try:
        for item in header.get("values") or []:
            name = str(item.get("name"))
            tname = str(item.get("type"))
            records = item.get("records")
            if (not isinstance(records, list) or not records
                    or not all(isinstance(n, int) and n >= 0
                               for n in records)):
                lost.append({"name": name, "type": tname,
                             "reason": "damaged entry in the checkpoint"})
                continue
            end = pos + sum(records)
            if end > records_end:
                lost.append({"name": name, "type": tname,
                             "reason": "the checkpoint is truncated"})
                pos = end
                continue
            main = view[pos:pos + records[0]]
            bufs, p = [], pos + records[0]
            for n in records[1:]:
                bufs.append(view[p:p + n])
                p += n
            pos = end
            deadline.arm()
            deadline.current = name
            try:
                namespace[name] = pickle.loads(main, buffers=bufs)
                restored.append(name)
            except CheckpointTimeout:
                lost.append({"name": name, "type": tname,
                             "reason": "unpickling took longer than %gs"
                                       % timeout})
            except MemoryError:
                lost.append({"name": name, "type": tname,
                             "reason": "unpickling ran out of memory"})
            except BaseException as e:
                lost.append({"name": name, "type": tname,
                             "reason": _reason(e)})
            finally:
                deadline.current = None
    finally:
        deadline.disarm()
    aliases = header.get("aliases") or {}
    for name, target in (aliases.items() if isinstance(aliases, dict)
                         else ()):
        if target in namespace and target in restored:
            namespace[name] = namespace[target]
            restored.append(name)
        else:
            lost.append({"name": name, "type": "alias",
                         "reason": "it named %s, which was not restored"
                                   % target})
    return out
