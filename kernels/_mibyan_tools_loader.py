# File: kernels/_mibyan_tools_loader.py
#
# Loading the generated `mibyan_tools` module (the stub, written by the
# host beside the runner and named by MIBYAN_KERNEL_STUB) into the kernel,
# and loading it again in place when the host says the tool set changed
# (a cell line's "reload_tools"). Loaded by the runner
# (kernels/mibyan_kernel_runner.py) from its own directory at start-up.
#
# Errors never raise: they are written to the runner's private stderr
# descriptor `err_fd` and the kernel goes on without (or with the old)
# module. Thread: the runner's main thread.

import sys

from _mibyan_frames import _write_all


def _new_stub(path):
    """The spec and an empty module for the stub at `path` (raises)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("mibyan_tools", path)
    if spec is None or spec.loader is None:
        raise ImportError("no loader for %r" % path)
    return spec, importlib.util.module_from_spec(spec)


def _complain(err_fd, what, path, e):
    msg = "mibyan kernel: cannot %s mibyan_tools from %s: %r\n" % (
        what, path, e)
    try:
        _write_all(err_fd, msg.encode("utf-8", "replace"))
    except OSError:
        pass


def _load_stub(path, err_fd):
    if not path:
        return
    try:
        spec, module = _new_stub(path)
        sys.modules["mibyan_tools"] = module
        spec.loader.exec_module(module)
    except BaseException as e:
        sys.modules.pop("mibyan_tools", None)
        _complain(err_fd, "load", path, e)


def _reload_stub(path, err_fd):
    module = sys.modules.get("mibyan_tools")
    if module is None:
        _load_stub(path, err_fd)
        return
    try:
        spec, fresh = _new_stub(path)
        spec.loader.exec_module(fresh)
    except BaseException as e:
        _complain(err_fd, "reload", path, e)
        return
    keep = {"__name__", "__loader__", "__spec__", "__file__", "__package__"}
    for name in list(module.__dict__):
        if name not in keep:
            del module.__dict__[name]
    for name, value in fresh.__dict__.items():
        if name not in keep:
            module.__dict__[name] = value
