# File: kernels/_mibyan_ckpt_snapshots.py
#
# Identity snapshots: how a checkpoint tells, without pickling, that a
# value is what the last checkpoint holds (docs/kernel_protocol.md,
# section 3.1). Immutable values are known by their identity; lists, dicts,
# sets and bytearrays by a snapshot of the objects they hold. Loaded by
# kernels/mibyan_checkpoint.py from its own directory. Standard library
# only; Python >= 3.8.
#
# Thread: the runner's main thread. Threads a cell started may change the
# values meanwhile; a snapshot is taken before the value is pickled, so
# such a change shows in the next pass and is never hidden (_watch).

import datetime
import operator
import re

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
