# File: kernels/_mibyan_watchdog.py
#
# The runner's parent-death watchdog (docs/kernel_protocol.md, section 1):
# a daemon thread blocked on the pipe named by MIBYAN_KERNEL_WATCHDOG_FD.
# End of file (the host died) or a "K" byte (the host ends the running
# cell) ends the kernel's process group and its descendants. Loaded by the
# runner (kernels/mibyan_kernel_runner.py) from its own directory at
# start-up.
#
# The runner puts its Kernel into _KERNEL[0] once constructed; the thread
# reads it to ship the running cell's output before the process ends.

import os
import signal
import threading
import time

WATCHDOG_TERM_GRACE = 0.5        # seconds between SIGTERM and SIGKILL


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
