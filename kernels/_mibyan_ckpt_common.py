# File: kernels/_mibyan_ckpt_common.py
#
# What taking and restoring a checkpoint share: the per-value time limit
# (a __reduce__ or an unpickling that hangs) and the texts of the entries
# of values that were not saved or not restored. Loaded by
# kernels/mibyan_checkpoint.py from its own directory. Standard library
# only; Python >= 3.8.
#
# Thread: _Deadline arms SIGALRM, which works only in the main thread
# (elsewhere arm() leaves it unarmed: no time limit).

import signal


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


def _reason(e):
    text = "%s: %s" % (type(e).__name__, e)
    return text if len(text) <= 300 else text[:297] + "..."
