"""Checks that kernels/mibyan_checkpoint.py notices every change of a
session namespace, however it is made, and pickles nothing it need not.

  python3 checkpoint_changes_check.py <path of mibyan_checkpoint.py> <dir>

Run by tests/kernel_checkpoint_test.cpp. Each case builds a namespace,
takes a checkpoint, changes something (or nothing), takes the next one and
checks (1) whether it reports a change, (2) that restoring the newest
checkpoint into an empty namespace gives the namespace as it is now, and
(3) that the runner's check before a frame (quick_unchanged) never says
"unchanged" when something changed. Prints one line per failure and exits
1 when any case failed."""

import importlib.util
import os
import sys
import threading
import types

spec = importlib.util.spec_from_file_location("_ck_under_test", sys.argv[1])
ck = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ck)
TMP = sys.argv[2]
failures = []
serial = [0]


class Obj(object):
    def __init__(self):
        self.x = 1

    def __repr__(self):
        return "Obj(%r)" % (self.__dict__,)


class Buf(object):
    """Pickles its data out of band (protocol 5), as array types do."""

    def __init__(self, data):
        self.data = bytearray(data)

    def __reduce_ex__(self, protocol):
        return (Buf, (ck.pickle.PickleBuffer(self.data),))

    def __repr__(self):
        return "Buf(%r)" % (bytes(self.data),)


def fresh_path():
    serial[0] += 1
    return os.path.join(TMP, "ck-%d.bin" % serial[0])


def restored(path):
    ns = {}
    out = ck.restore(ns, path, 10)
    if out["error"]:
        raise AssertionError("restore failed: " + out["error"])
    return ns


def same(a, b):
    if type(a) is not type(b):
        return False
    if isinstance(a, types.BuiltinMethodType) and \
            not isinstance(a.__self__, types.ModuleType):
        # A bound method: its object's state counts, not its address.
        return a.__name__ == b.__name__ and same(a.__self__, b.__self__)
    return repr(a) == repr(b)


def case(name, setup, change, expect_changed):
    ns = {"__builtins__": __builtins__}
    exec(setup, globals(), ns)
    c = ck.Checkpointer(ns)
    first = fresh_path()
    c.write(first, 1, 0, 10)
    last = first
    # A second pass with nothing changed: unchanged, by both checks.
    s = c.write(fresh_path(), 2, 0, 10)
    if s["changed"]:
        failures.append("%s: a pass with no change reported a change" % name)
    exec(change, globals(), ns)
    quick = c.quick_unchanged()
    path = fresh_path()
    s = c.write(path, 3, 0, 10)
    if s["changed"] != expect_changed:
        failures.append("%s: changed=%r, expected %r"
                        % (name, s["changed"], expect_changed))
    if s["changed"]:
        last = path
        if quick:
            failures.append("%s: quick_unchanged said unchanged after a "
                            "change" % name)
    back = restored(last)
    for key, value in ns.items():
        if key == "__builtins__" or key == "t0":
            continue
        if key not in back:
            failures.append("%s: %s not restored" % (name, key))
        elif not same(back[key], value):
            failures.append("%s: %s restored as %r, is %r"
                            % (name, key, back[key], value))
    # And the pass after the change: unchanged again.
    s = c.write(fresh_path(), 4, 0, 10)
    if s["changed"]:
        failures.append("%s: the pass after the change reported a change"
                        % name)


case("list append", "l = [1, 2, 3]", "l.append(4)", True)
case("list item replaced", "l = ['a', 'b']", "l[0] = 'c'", True)
case("equal int, new object", "l = [10 ** 20]", "l[0] = int(str(10 ** 20))",
     False)
case("1 becomes 1.0", "l = [1, 2]", "l[0] = 1.0", True)
case("0.0 becomes -0.0", "l = [0.0]", "l[0] = -0.0", True)
case("True becomes 1", "d = {'k': True}", "d['k'] = 1", True)
case("nested record", "recs = [{'i': i, 's': [i]} for i in range(300)]",
     "recs[150]['s'].append('x')", True)
case("dict of lists", "d = {'a': [1], 'b': [2]}", "d['b'][0] = 3", True)
case("dict order", "d = {'a': 1, 'b': 2}", "del d['a']\nd['a'] = 1", True)
case("dict key added", "d = {'a': 1}", "d['b'] = 2", True)
case("set", "s = {1, 2, 3}", "s.discard(2)\ns.add(4)", True)
case("bytearray", "b = bytearray(b'abc')", "b[0] = 0x7a", True)
case("tuple holding a list", "t = ([1], 2)", "t[0].append(5)", True)
case("frozenset in a list", "l = [frozenset([1, 2])]",
     "l.append(frozenset([3]))", True)
case("object attribute", "o = Obj()", "o.x = 2", True)
case("object in a list", "l = [Obj()]", "l[0].x = 5", True)
case("alias", "a = [1]\nb = a", "a.append(2)", True)
case("self reference", "l = [1]\nl.append(l)", "l[0] = 2", True)
case("large list", "big = list(range(5000))", "big[4000] = -1", True)
case("large list, nothing", "big = list(range(5000))", "pass", False)
case("many names", "\n".join("v%d = [%d]" % (i, i) for i in range(400)),
     "v399.append(1)", True)
case("rebinding", "x = [1]", "x = [1]", False)
case("new name", "x = 1", "y = 2", True)
case("removed name", "x = 1\ny = 2", "del y", True)
case("nothing", "x = {'k': [1, 2]}\nn = 5", "pass", False)
case("out-of-band buffer", "o = Buf(b'abc' * 100)", "o.data[0] = 0x7a",
     True)
case("bound method", "l = [1]\nadd = l.append", "add(2)", True)
case("regex and dates", "import re, datetime\nrx = re.compile('a+')\n"
     "when = [datetime.date(2020, 1, 2)]", "when.append(rx)", True)
# A thread changes a list in place after the cell.
case("thread", "l = [1]",
     "t0 = threading.Thread(target=l.append, args=(7,))\nt0.start()\n"
     "t0.join()", True)


def count_pickles(setup, change):
    """How many values a checkpoint after `change` pickled."""
    ns = {"__builtins__": __builtins__}
    exec(setup, globals(), ns)
    c = ck.Checkpointer(ns)
    c.write(fresh_path(), 1, 0, 10)
    exec(change, globals(), ns)
    real = ck.pickle.dumps
    calls = [0]

    def counting(*a, **k):
        calls[0] += 1
        return real(*a, **k)

    ck.pickle.dumps = counting
    try:
        c.write(fresh_path(), 2, 0, 10)
    finally:
        ck.pickle.dumps = real
    return calls[0]


# One name changed among many containers: only it is pickled.
n = count_pickles("\n".join("l%d = [%d, 'x', {'k': %d}]" % (i, i, i)
                            for i in range(500)), "l7.append(1)")
if n != 1:
    failures.append("one list changed among 500: %d values pickled" % n)
# A large value that changed is pickled once, not once to find out it
# changed and once more to save it.
n = count_pickles("big = [Obj() for i in range(50000)]", "big.append(Obj())")
if n != 1:
    failures.append("a changed large value was pickled %d times" % n)

for f in failures:
    print("FAIL " + f)
print("%d failures" % len(failures))
sys.exit(1 if failures else 0)
