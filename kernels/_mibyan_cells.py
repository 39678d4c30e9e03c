# File: kernels/_mibyan_cells.py
#
# The runner's cell executor: one cell's code compiled (with a cache of
# warning-free code objects) and run in the kernel's namespace with its
# output captured, SystemExit and exceptions turned into the cell's frame,
# fds 1 and 2 restored between cells and a process forked by a cell sent
# on its way (docs/kernel_protocol.md, sections 3 and 4.1). Loaded by the
# runner (kernels/mibyan_kernel_runner.py) from its own directory at
# start-up. Standard library only; Python >= 3.8.
#
# CellRunner is a part of the runner's Kernel (kernels/_mibyan_kernel.py)
# and uses its attributes `globals`, `pid`, `execution_count`, `current`,
# `idle_out`, `idle_err`, `frame_fd`, `err_fd`, `checkpoint_req`,
# `_checkpointer`, `_compiled`, `_fd_poller`, `_spare_streams`,
# `_next_streams`, `_free_refs` and its send_frame. Thread: the runner's
# main thread.

import os
import select
import sys
import traceback
import warnings

from _mibyan_capture import CAPTURE_LIMIT, CellStream, _stream_refs
from _mibyan_frames import _clip_text, _utf8_safe, _write_all

ENV_RPC_TIMEOUT = "MIBYAN_RPC_TIMEOUT"
ENV_RPC_CELL = "MIBYAN_RPC_CELL"


class _CompileCache(object):
    """Code objects of recently run cell texts, keyed by the exact text.

    A code object does not depend on the globals it later runs in, and a
    cell's compilation depends only on its text (the runner's own
    compiler flags are fixed), so running a cached one is the same as
    compiling the text again, with one exception this cache rules out:
    compilation can emit warnings (SyntaxWarning for `x is 1`, invalid
    escape sequences), which a real interpreter prints on every run. A
    text is cached only after it was seen twice and a silent compilation
    with every warning enabled recorded none; that check runs between
    cells (`settle`, after the frame). Bounded in entries and text size.
    """

    MAX_ENTRIES = 64
    MAX_TEXT = 16384          # characters; longer cells are not cached

    def __init__(self):
        self._code = {}       # text -> code object (warning-free)
        self._seen = {}       # text -> None: compiled once, in order
        self._pending = None  # a text to check at the next settle()

    def compile(self, text):
        code = self._code.get(text)
        if code is not None:
            return code
        code = compile(text, "<cell>", "exec")
        if len(text) <= self.MAX_TEXT:
            if text in self._seen:
                self._pending = text
            else:
                self._seen[text] = None
                if len(self._seen) > self.MAX_ENTRIES:
                    del self._seen[next(iter(self._seen))]
        return code

    def settle(self):
        text, self._pending = self._pending, None
        if text is None:
            return
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                code = compile(text, "<cell>", "exec")
        except BaseException:
            return
        self._seen.pop(text, None)
        if caught:
            return
        self._code[text] = code
        if len(self._code) > self.MAX_ENTRIES:
            del self._code[next(iter(self._code))]


def _exit_code(code):
    if code is None:
        return 0
    if isinstance(code, int):
        return int(code)
    return 1


def _is_open_fd(fd):
    try:
        os.get_inheritable(fd)   # fcntl(F_GETFD): EBADF when closed
        return True
    except OSError:
        return False


class CellRunner(object):
    """Runs cells (a part of Kernel)."""

    def _restore_fds(self):
        # A previous cell may have closed fd 1 or 2; subprocesses of later
        # cells still deserve a place to write. One poll() tells for both
        # (POLLNVAL: not open).
        poller = self._fd_poller
        if poller is not None:
            try:
                closed = [fd for fd, ev in poller.poll(0)
                          if ev & select.POLLNVAL]
            except OSError:
                closed = [fd for fd in (1, 2) if not _is_open_fd(fd)]
        else:
            closed = [fd for fd in (1, 2) if not _is_open_fd(fd)]
        for fd in closed:
            try:
                os.dup2(self.frame_fd if fd == 1 else self.err_fd, fd,
                        inheritable=True)
            except OSError:
                pass

    def _set_rpc_timeout(self, timeout):
        # The stub reads it per call; subprocesses inherit it.
        value = repr(float(timeout))
        if os.environ.get(ENV_RPC_TIMEOUT) != value:
            os.environ[ENV_RPC_TIMEOUT] = value

    def _capture_stream(self, slot, fd):
        """A fresh capture stream for fd 1 (slot 0) or 2 (slot 1): the
        previous cell's, emptied, when it is still open and nothing refers
        to it (a saved sys.stdout, a bound method, its buffer, a weak
        reference), so no one can tell it from a new one; else a new one."""
        old = self._spare_streams[slot]
        self._spare_streams[slot] = None
        if (old is not None and not old.closed
                and _stream_refs(old) == self._free_refs):
            old.reset()
            return old
        return CellStream(fd, CAPTURE_LIMIT)

    def _prepare_streams(self):
        return self._capture_stream(0, 1), self._capture_stream(1, 2)

    def between_cells(self):
        """Work for the next cell done once a frame is out, off the path
        from a cell line to its frame: fds 1 and 2 restored, the next
        cell's capture streams made ready, the compile cache's warning
        check."""
        self._restore_fds()
        self._next_streams = self._prepare_streams()
        self._compiled.settle()

    def _run_atexit(self):
        try:
            import atexit
            atexit._run_exitfuncs()
        except BaseException:
            pass

    def run_cell(self, cell_id, code, timeout):
        """Runs one cell and sends its frame. Returns the exit code when the
        cell ended the kernel, else None."""
        if timeout is not None:
            self._set_rpc_timeout(timeout)
        # The stub tags tool calls with the cell they belong to; threads
        # and subprocesses keep the id of the cell that started them.
        os.environ[ENV_RPC_CELL] = cell_id
        self.execution_count += 1
        out, err = self._next_streams or self._prepare_streams()
        self._next_streams = None
        sys.stdout, sys.stderr = out, err
        self.current = (cell_id, out, err)
        status, trace, exit_code = "ok", "", 0
        try:
            compiled = self._compiled.compile(code)
            exec(compiled, self.globals)
        except SystemExit as e:
            status = "exit"
            exit_code = _exit_code(e.code)
            trace = _clip_text("SystemExit: %r" % (e.code,))
            # A real interpreter runs atexit handlers on sys.exit(); run them
            # while output is still captured for this cell.
            self._run_atexit()
        except BaseException as e:
            status, exit_code = "error", 1
            trace = self._format_exception(e)
        finally:
            sys.stdout, sys.stderr = self.idle_out, self.idle_err
            self.current = None
        if os.getpid() != self.pid:
            self._end_forked_child(out, err, trace, exit_code)
        out_text, out_clipped, out_total = out.snapshot()
        err_text, err_clipped, err_total = err.snapshot()
        body = {
            "id": cell_id, "status": status,
            "stdout": out_text, "stderr": err_text,
            "stdout_clipped": out_clipped, "stderr_clipped": err_clipped,
            "stdout_total": out_total, "stderr_total": err_total,
            "traceback": trace, "execution_count": self.execution_count,
            "exit_code": exit_code}
        if self.checkpoint_req is not None and status in ("ok", "error"):
            # Section 3.1: in a small namespace "unchanged" costs next to
            # nothing to tell and is answered in this frame. Otherwise the
            # checkpoint (or the check) follows the frame, off the result's
            # path.
            ckpt = self._checkpointer
            if ckpt is not None and ckpt.quick_unchanged():
                self.checkpoint_req = None
                body["checkpoint"] = "unchanged"
            else:
                body["checkpoint"] = "follows"
        self.send_frame(body)
        self._spare_streams[0], self._spare_streams[1] = out, err
        return exit_code if status == "exit" else None

    def _end_forked_child(self, out, err, trace, exit_code):
        # A process forked by the cell fell out of the cell's code, as at the
        # end of a script. It must neither send a frame nor read cell lines:
        # its output goes out at fd level and it exits.
        for fd, text in ((1, out.value()), (2, err.value() + trace)):
            try:
                _write_all(fd, _utf8_safe(text).encode("utf-8"))
            except OSError:
                pass
        os._exit(exit_code & 0xFF)

    @staticmethod
    def _format_exception(e):
        try:
            tb = e.__traceback__
            # Drop the runner's own frame (the exec call) from the trace.
            if tb is not None and tb.tb_frame.f_code is \
                    CellRunner.run_cell.__code__:
                tb = tb.tb_next
            return _clip_text(
                "".join(traceback.format_exception(type(e), e, tb)))
        except BaseException:
            return "%s: <exception could not be formatted>" % \
                type(e).__name__
