# File: kernels/_mibyan_kernel.py
#
# The runner's Kernel: its state, the loop that reads one request line at a
# time from the host and answers each with exactly one frame, and the
# parsing of those lines (docs/kernel_protocol.md, sections 3 and 3.1). Its
# parts live beside it: frames (kernels/_mibyan_frames.py), cells
# (kernels/_mibyan_cells.py) and checkpoints
# (kernels/_mibyan_checkpoint_ops.py). Loaded by the runner
# (kernels/mibyan_kernel_runner.py) from its own directory at start-up.
#
# Thread: the runner's main thread, except send_killed (the watchdog
# thread; frames are written under a lock).

import builtins
import json
import os
import select
import threading
import types

from _mibyan_capture import CellStream, _stream_refs
from _mibyan_cells import CellRunner, _CompileCache
from _mibyan_checkpoint_ops import CheckpointOps
from _mibyan_frames import FrameWriter
from _mibyan_tools_loader import _reload_stub


def _is_plain_file_name(name):
    return (isinstance(name, str) and 0 < len(name) <= 128
            and "/" not in name and "\0" not in name
            and name not in (".", ".."))


class Kernel(FrameWriter, CellRunner, CheckpointOps):
    """One kernel process's state and request loop. Made once by the
    runner's main(), after the stub is loaded."""

    def __init__(self, sentinel, frame_fd, err_fd, cmd_file):
        self.sentinel = sentinel.encode("utf-8")
        self.frame_fd = frame_fd      # private dup of the original fd 1
        self.err_fd = err_fd          # private dup of the original fd 2
        self.cmd_file = cmd_file      # private reader of the original fd 0
        self.execution_count = 0
        self.stub_path = ""           # mibyan_tools, loaded again on request
        self.reload_tools = False     # set by parse_line for the next cell
        self.pid = os.getpid()
        self.main = types.ModuleType("__main__")
        self.main.__dict__["__builtins__"] = builtins
        self.globals = self.main.__dict__
        self.idle_out = CellStream(1, 0)
        self.idle_err = CellStream(2, 0)
        # The previous cell's capture streams, reused when nothing kept
        # them (_capture_stream), and the reference counts of a stream
        # nobody else holds.
        self._spare_streams = [None, None]
        # The next cell's capture streams, made ready between cells.
        self._next_streams = None
        probe = CellStream(1, 0)
        self._free_refs = _stream_refs(probe)
        del probe
        self._compiled = _CompileCache()
        self._fd_poller = None
        if hasattr(select, "poll"):
            self._fd_poller = select.poll()
            self._fd_poller.register(1, 0)
            self._fd_poller.register(2, 0)
        self._libc_fflush = None
        # Checkpoints (section 3.1): the request of the line being served,
        # and the module, loaded on first use.
        self.checkpoint_req = None
        self.restore_req = None
        self.op = None
        self._checkpointer = None
        self._ckpt_module = None
        # The running cell's id and capture streams, for the SIGTERM frame.
        self.current = None
        self._frame_lock = threading.Lock()

    # -- requests -----------------------------------------------------------

    def parse_line(self, raw):
        """Returns (id, code, timeout, error)."""
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            return None, None, None, "the line is not valid UTF-8"
        line = line.strip()
        if not line:
            return None, None, None, "empty line"
        try:
            req = json.loads(line)
        except ValueError as e:
            return None, None, None, "not JSON (%s)" % e
        if not isinstance(req, dict):
            return None, None, None, "expected a JSON object"
        cell_id = req.get("id")
        if not isinstance(cell_id, str) or not cell_id:
            return None, None, None, "'id' must be a non-empty string"
        self.checkpoint_req = None
        self.op = None
        op = req.get("op")
        if op is not None:
            return self._parse_op(cell_id, op, req)
        code = req.get("code")
        if not isinstance(code, str):
            return cell_id, None, None, "'code' must be a string"
        if "checkpoint" in req:
            error = self._parse_checkpoint(req.get("checkpoint"))
            if error is not None:
                return cell_id, None, None, error
        self.reload_tools = req.get("reload_tools") is True
        timeout = req.get("timeout")
        if timeout is not None:
            if (isinstance(timeout, bool)
                    or not isinstance(timeout, (int, float))
                    or not timeout > 0):
                return cell_id, None, None, \
                    "'timeout' must be a positive number"
        return cell_id, code, timeout, None

    def _parse_checkpoint(self, spec):
        """A cell's or op's "checkpoint" member (section 3.1); the error
        text or None."""
        if not isinstance(spec, dict):
            return "'checkpoint' must be an object"
        name = spec.get("file")
        max_bytes = spec.get("max_bytes", 0)
        timeout = spec.get("timeout", 5)
        if not _is_plain_file_name(name):
            return "'checkpoint.file' must be a plain file name"
        if (isinstance(max_bytes, bool) or not isinstance(max_bytes, int)
                or max_bytes < 0):
            return "'checkpoint.max_bytes' must be a non-negative integer"
        if (isinstance(timeout, bool)
                or not isinstance(timeout, (int, float)) or not timeout > 0):
            return "'checkpoint.timeout' must be a positive number"
        self.checkpoint_req = (name, max_bytes, float(timeout))
        return None

    def _parse_op(self, cell_id, op, req):
        if op == "checkpoint":
            error = self._parse_checkpoint(req.get("checkpoint"))
            if error is not None:
                return cell_id, None, None, error
        elif op == "restore":
            name = req.get("file")
            timeout = req.get("timeout", 30)
            if not _is_plain_file_name(name):
                return cell_id, None, None, \
                    "'file' must be a plain file name"
            if (isinstance(timeout, bool)
                    or not isinstance(timeout, (int, float))
                    or not timeout > 0):
                return cell_id, None, None, \
                    "'timeout' must be a positive number"
            self.restore_req = (name, float(timeout))
        else:
            return cell_id, None, None, "unknown 'op' %r" % (op,)
        self.op = op
        return cell_id, "", None, None

    # -- main loop ----------------------------------------------------------

    def serve(self):
        while True:
            try:
                raw = self.cmd_file.readline()
            except (OSError, ValueError):
                raw = b""
            if not raw:
                return 0
            cell_id, code, timeout, error = self.parse_line(raw)
            if error is not None:
                self.protocol_error(cell_id, error)
                continue
            if self.op is not None:
                op, self.op = self.op, None
                if op == "restore":
                    self.run_restore(cell_id)
                else:
                    self.send_checkpoint(cell_id)
                continue
            if self.reload_tools:
                # The tool set changed: the module's contents are replaced
                # in place, so `import mibyan_tools` bindings of earlier
                # cells see the new set too.
                self.reload_tools = False
                _reload_stub(self.stub_path, self.err_fd)
            code_or_none = self.run_cell(cell_id, code, timeout)
            if code_or_none is not None:
                return code_or_none
            # The next cell's streams first: they are ready by the time the
            # host has the frame, the checkpoint after them.
            self.between_cells()
            if self.checkpoint_req is not None:
                self.send_checkpoint(cell_id)
