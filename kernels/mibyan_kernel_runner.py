# File: kernels/mibyan_kernel_runner.py
#
# The session kernel of execute_code: a long-lived Python process that runs
# cells sent by the host (the C++ kernel actor) and answers each one with a
# framed JSON reply. Standard library only; Python >= 3.8.
#
# The protocol (cell lines, reply frames, private environment variables, the
# parent-death watchdog) is specified in docs/kernel_protocol.md. In short:
#
#   stdin   one JSON line per cell: {"id": "<hex>", "code": "<source>",
#           "timeout": <seconds, optional>}
#   fd 1    raw fd-level output of the cell (subprocesses, os.write) followed
#           by exactly one reply frame per input line:
#           "\n" SENTINEL " " <body byte length> "\n" <UTF-8 JSON body>
#   fd 2    raw fd-level stderr of the cell
#
# Invariants the host relies on:
#   * every line read from stdin produces exactly one frame;
#   * Python-level sys.stdout/sys.stderr never reach fd 1/2 while a cell runs
#     (they are captured per cell), so print() cannot forge a frame;
#   * frames are written to a private duplicate of the original fd 1, so a
#     cell that closes sys.stdout or fd 1 still gets its frame;
#   * after an "exit" frame the process ends.
#
# The runner is this file and its modules beside it, all written into the
# kernel's staging dir by the host (kernels/runner_source.hpp):
#
#   _mibyan_frames.py          reply frames: encoding and writing
#   _mibyan_capture.py         the streams that capture a cell's output
#   _mibyan_cells.py           the cell executor
#   _mibyan_checkpoint_ops.py  checkpoint and restore requests
#   _mibyan_tools_loader.py    loading the generated mibyan_tools module
#   _mibyan_kernel.py          the Kernel: state, request loop, parsing
#   _mibyan_watchdog.py        the parent-death watchdog
#   mibyan_checkpoint.py       namespace checkpoints (loaded on first use)
#
# The modules are loaded at start-up by exact path from this file's
# directory (_load_module) and registered in sys.modules under their names,
# which start with "_mibyan_" so they cannot be mistaken for a user's
# modules; a cell's `import` finds its own modules as before.

import gc
import importlib.util
import os
import sys

ENV_SENTINEL_FD = "MIBYAN_KERNEL_SENTINEL_FD"
ENV_STUB = "MIBYAN_KERNEL_STUB"
ENV_WATCHDOG_FD = "MIBYAN_KERNEL_WATCHDOG_FD"
PRIVATE_ENV = (ENV_SENTINEL_FD, ENV_STUB, ENV_WATCHDOG_FD)
SENTINEL_MAX = 4096              # bytes read from the sentinel pipe

# The runner's own directory (the staging dir), where its modules live.
_HERE = os.path.dirname(os.path.abspath(__file__))

# The runner's modules in the order they are loaded: each after the ones it
# imports (adding a module: here, and in CMakeLists.txt's
# MIBYAN_KERNEL_MODULES).
_MODULES = ("_mibyan_frames", "_mibyan_capture", "_mibyan_cells",
            "_mibyan_checkpoint_ops", "_mibyan_tools_loader",
            "_mibyan_kernel", "_mibyan_watchdog")


def _load_module(name):
    """Loads <_HERE>/<name>.py and registers it as sys.modules[name], so
    the `from <name> import ...` lines of the modules loaded after it find
    it. By exact path: loading depends neither on sys.path (PYTHONPATH,
    PYTHONSAFEPATH) nor on what the working directory holds. Raises what
    loading raises: the runner then exits before its ready frame, which
    the host reports as a failed start."""
    spec = importlib.util.spec_from_file_location(
        name, os.path.join(_HERE, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


for _name in _MODULES:
    _load_module(_name)

from _mibyan_frames import _find_fflush  # noqa: E402
from _mibyan_kernel import Kernel  # noqa: E402
from _mibyan_tools_loader import _load_stub  # noqa: E402
from _mibyan_watchdog import _KERNEL, _start_watchdog  # noqa: E402


def _read_sentinel(value):
    """Reads the reply sentinel from the inherited pipe named by `value`
    (until end of file) and closes it. The sentinel never travels in the
    environment, where a cell could read it from /proc/self/environ."""
    try:
        fd = int(value)
    except (TypeError, ValueError):
        return ""
    data = b""
    try:
        while len(data) <= SENTINEL_MAX:
            chunk = os.read(fd, SENTINEL_MAX + 1 - len(data))
            if not chunk:
                break
            data += chunk
    except OSError:
        return ""
    finally:
        try:
            os.close(fd)
        except OSError:
            pass
    if len(data) > SENTINEL_MAX:
        return ""
    return data.decode("utf-8", "replace").strip()


def main():
    env = os.environ
    sentinel = _read_sentinel(env.get(ENV_SENTINEL_FD))
    stub_path = env.get(ENV_STUB, "")
    watchdog = env.get(ENV_WATCHDOG_FD)
    for name in PRIVATE_ENV:
        env.pop(name, None)
    if not sentinel or any(c.isspace() for c in sentinel):
        sys.__stderr__.write("mibyan kernel: no valid sentinel on the pipe "
                             "named by %s\n" % ENV_SENTINEL_FD)
        return 2
    if watchdog is not None:
        _start_watchdog(watchdog)

    # Private descriptors: frames, runner diagnostics and cell requests stay
    # usable whatever a cell does to fds 0, 1 and 2 (os.dup is
    # non-inheritable, so children never see them).
    frame_fd = os.dup(1)
    err_fd = os.dup(2)
    cmd_fd = os.dup(0)
    # Cells must not consume request lines: input() sees end of file.
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    cmd_file = os.fdopen(cmd_fd, "rb")

    _load_stub(stub_path, err_fd)
    # Like an interactive interpreter: the working directory is importable.
    if sys.path and sys.path[0] == os.path.dirname(os.path.abspath(__file__)):
        sys.path[0] = ""
    sys.argv = [""]

    # Everything loaded so far (runner, stub, ctypes for fflush) lives as
    # long as the kernel: keep it out of every collection, so a cell's
    # collections traverse only the cell's own objects.
    fflush = _find_fflush()
    gc.freeze()
    kernel = Kernel(sentinel, frame_fd, err_fd, cmd_file)
    kernel.stub_path = stub_path
    kernel._libc_fflush = fflush
    sys.modules["__main__"] = kernel.main
    sys.stdout, sys.stderr = kernel.idle_out, kernel.idle_err
    _KERNEL[0] = kernel
    kernel.send_ready()
    code = kernel.serve()
    # Threads a cell left running must not keep a finished kernel alive.
    try:
        os.close(frame_fd)
    except OSError:
        pass
    os._exit(code & 0xFF)


if __name__ == "__main__":
    sys.exit(main())
