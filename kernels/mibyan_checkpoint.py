# File: kernels/mibyan_checkpoint.py
#
# Checkpoints of a session kernel's user namespace (docs/kernel_protocol.md,
# section 3.1; docs/execute_code.md, "Checkpoints"). Loaded by the runner
# (kernels/_mibyan_checkpoint_ops.py) from its own directory, by exact path,
# the first time the host asks for a checkpoint or a restore. Standard
# library only; Python >= 3.8.
#
# This file holds the Checkpointer (what changed since the last checkpoint,
# and writing the next one) and loads its parts from its own directory:
#
#   _mibyan_ckpt_common.py     the per-value time limit, not-saved texts
#   _mibyan_ckpt_snapshots.py  identity snapshots (unchanged without pickling)
#   _mibyan_ckpt_file.py       the file format and its writer
#   _mibyan_ckpt_restore.py    reading a file back into a namespace
#
# and offers their public names (restore, read_header, the format's
# constants) as its own.
#
# Thread: the runner's main thread only (the timeout uses SIGALRM).

import importlib.util
import operator
import os
import pickle
import struct
import sys
import time
import types

# What the runner checks before a cell's frame to answer "unchanged" in it
# (Checkpointer.quick_unchanged): at most QUICK_ITEMS bindings and
# container slots together, compared by identity in C (a few microseconds)
# and no value that only its pickle can tell. Past that the check runs
# after the frame, off the result's path.
QUICK_ITEMS = 256

_HERE = os.path.dirname(os.path.abspath(__file__))


def _load_sibling(name):
    """Loads <_HERE>/<name>.py by exact path (a kernel's sys.path need not
    hold the staging dir once cells run) and registers it as
    sys.modules[name], so the `from <name> import ...` lines of the
    modules loaded after it find it; one registered from the same file is
    reused. Raises what loading raises."""
    path = os.path.join(_HERE, name + ".py")
    module = sys.modules.get(name)
    if module is not None and getattr(module, "__file__", None) == path:
        return module
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# Each after the ones it imports.
for _name in ("_mibyan_ckpt_common", "_mibyan_ckpt_snapshots",
              "_mibyan_ckpt_file", "_mibyan_ckpt_restore"):
    _load_sibling(_name)

from _mibyan_ckpt_common import (  # noqa: E402,F401
    CheckpointTimeout, _Deadline, _reason, _type_name)
from _mibyan_ckpt_file import (  # noqa: E402,F401
    DIRECT_WRITE, FORMAT, MAGIC, MAGIC2, MAX_HEADER, PROTOCOL, WRITE_CHUNK,
    _Sink, _entry, _header, _no_sink, _same_pickle)
from _mibyan_ckpt_restore import read_header, restore  # noqa: E402,F401
from _mibyan_ckpt_snapshots import (  # noqa: E402,F401
    WATCH_LIMIT, _ATOMIC_SET, _CONTAINERS, _holds, _immutable, _watch)


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
