# File: kernels/_mibyan_checkpoint_ops.py
#
# The runner's side of namespace checkpoints (docs/kernel_protocol.md,
# section 3.1): the checkpoint module (kernels/mibyan_checkpoint.py) loaded
# by exact path on first use, the "checkpoint" frame after a cell or an
# explicit op, and the restore op. Loaded by the runner
# (kernels/mibyan_kernel_runner.py) from its own directory at start-up; the
# checkpoint module itself is loaded only when the host first asks.
#
# CheckpointOps is a part of the runner's Kernel (kernels/_mibyan_kernel.py)
# and uses its attributes `globals`, `execution_count`, `checkpoint_req`,
# `restore_req`, `_checkpointer`, `_ckpt_module` and its send_frame.
# Thread: the runner's main thread (the checkpoint module's timeouts use
# SIGALRM).

import os

# The runner's own directory (the staging dir): checkpoint files and the
# checkpoint module live there.
_HERE = os.path.dirname(os.path.abspath(__file__))


class CheckpointOps(object):
    """Takes and restores checkpoints (a part of Kernel)."""

    def _checkpoints(self):
        """The checkpoint module, loaded by exact path on first use."""
        if self._checkpointer is None:
            import importlib.util
            path = os.path.join(_HERE, "mibyan_checkpoint.py")
            spec = importlib.util.spec_from_file_location(
                "_mibyan_checkpoint", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            self._ckpt_module = module
            self._checkpointer = module.Checkpointer(self.globals)
        return self._checkpointer

    def send_checkpoint(self, cell_id):
        """The checkpoint frame for a cell or an op that asked for one
        (section 3.1): written after the cell's own frame, so the cell's
        result is never held up by it."""
        name, max_bytes, timeout = self.checkpoint_req
        self.checkpoint_req = None
        body = {"id": cell_id, "status": "checkpoint",
                "execution_count": self.execution_count}
        try:
            ckpt = self._checkpoints()
            summary = ckpt.write(os.path.join(_HERE, name),
                                 self.execution_count, max_bytes, timeout)
            if summary["changed"]:
                body.update(summary)
                body["file"] = name
            else:
                body["changed"] = False   # the short frame of most cells
        except BaseException as e:
            body.update({"changed": False, "error": "%s: %s" % (
                type(e).__name__, e)})
        # No cell's output precedes it: nothing to flush first.
        self.send_frame(body, flush=False)

    def run_restore(self, cell_id):
        """Restores the checkpoint the host wrote (after checking its
        HMAC) into the namespace; one "restored" frame."""
        name, timeout = self.restore_req
        self.restore_req = None
        path = os.path.join(_HERE, name)
        # Output of unpickling code (between cells) is discarded.
        try:
            self._checkpoints()
            out = self._ckpt_module.restore(self.globals, path, timeout)
        except BaseException as e:
            out = {"restored": [], "not_restored": [],
                   "execution_count": None,
                   "error": "%s: %s" % (type(e).__name__, e)}
        try:
            os.unlink(path)
        except OSError:
            pass
        count = out.get("execution_count")
        if isinstance(count, int) and count > self.execution_count:
            self.execution_count = count
        # The restored values are the kernel's state now: the next
        # checkpoint compares against them.
        if self._checkpointer is not None and not out["error"]:
            try:
                self._checkpointer.collect(0, 5.0)
            except BaseException:
                pass
        self.send_frame({"id": cell_id, "status": "restored",
                         "restored": out["restored"],
                         "not_restored": out["not_restored"],
                         "error": out["error"],
                         "execution_count": self.execution_count})
