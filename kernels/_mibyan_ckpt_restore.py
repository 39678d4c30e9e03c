# File: kernels/_mibyan_ckpt_restore.py
#
# Restoring a checkpoint file (docs/kernel_protocol.md, section 3.1;
# the format: kernels/_mibyan_ckpt_file.py) into a kernel's namespace.
#
# The runner never trusts the file's origin: the host verifies its HMAC
# before it writes a restore file (the key never enters the sandbox). The
# checks here (magic, format, versions, lengths) report damage by name
# instead of failing the whole restore. Loaded by
# kernels/mibyan_checkpoint.py from its own directory. Standard library
# only; Python >= 3.8.
#
# Thread: the runner's main thread (the timeout uses SIGALRM).

import importlib
import json
import mmap
import pickle
import struct
import sys

from _mibyan_ckpt_common import CheckpointTimeout, _Deadline, _reason
from _mibyan_ckpt_file import MAGIC, MAGIC2, MAX_HEADER


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
