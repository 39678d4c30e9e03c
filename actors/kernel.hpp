// File: actors/kernel.hpp
//
// One actor per Python kernel process: a CAF broker on the middleman's
// epoll thread that owns the child's stdin/stdout/stderr socketpairs and
// the kernel's private RPC socket, so nothing here blocks a scheduler
// thread.
//
// Protocol (untyped broker handle; `kernel_cell_actor` is its typed view
// for delegating):
//   (exec_atom, exec_cell) -> tool_response
//       Runs one cell and answers with the execute_code result object.
//       Cells queue when one is running. Never fails: a dead kernel is an
//       error result, and every cell taken is answered, however the
//       broker ends. The answer goes to whoever sent the request, so the
//       registry delegates and stays off the reply path; it learns about
//       the kernel's use through `kernel_usage`.
//   (interrupt_atom, std::string reason)
//       Kills the kernel; the running cell answers "interrupted".
//   (interrupt_atom, interrupt_request) with a call id
//       The same when the running cell is that call's; a queued cell of
//       that call is answered "interrupted" without running; else nothing.
//   (checkpoint_atom, std::string session, bool restore)
//       Sent by the registry when the kernel starts serving a session with
//       checkpoints on, before its first cell: with `restore`, the
//       session's latest checkpoint (verified by the host) is restored
//       before that cell; without, the session's checkpoints are dropped
//       (reset). From then on each cell is followed by a checkpoint
//       (docs/execute_code.md, "Checkpoints"; actors/kernel_checkpoint_io.cpp).
//   (checkpoint_atom) -> bool
//       Takes a checkpoint now (after the running cell, if any) and
//       answers once it is stored: true, or false when it could not be
//       (no session, the kernel ended, the store failed). For drain.
//   exit (any reason)
//       Kills the process group and removes the staging dir.
//
// RPC frames from the script become tool_requests (`from_script = true`),
// each run by its own invocation actor (actors/tool_invocation.hpp) after
// the token, cell-authority, allow-list, duplicate-id and budget
// checks (docs/execute_code.md, "Per-cell budgets"); replies are written
// from the handler (kernels/direct_writes.hpp). Calls still running when
// the cell ends, however it ends, are interrupted (cancelled). The code: actors/kernel.cpp
// (behavior), actors/kernel_cells.cpp (cells), actors/kernel_rpc.cpp (RPC),
// actors/kernel_broker.hpp.
//
// After the kernel process is gone (exit, death, timeout, interrupt) the
// actor quits; its owner monitors it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "caf/fwd.hpp"
#include "caf/replies_to.hpp"
#include "caf/typed_actor.hpp"

#include "kernels/kernel_process.hpp"
#include "actors/services.hpp"
#include "messages/type_ids.hpp"

namespace mibyan {

/// The kernel broker's cell interface, for typed delegation.
using kernel_cell_actor = caf::typed_actor<
  caf::replies_to<exec_atom, exec_cell>::with<tool_response>>;

/// What the registry needs to know about a kernel's use without being on
/// the reply path; shared by the registry and the warm-cell fast path
/// (actors/warm_kernels.hpp), which count a cell in `attached` when they
/// hand it over, and the broker (which writes everything else). Any
/// thread.
struct kernel_usage {
  /// Cells handed to the kernel and not yet answered.
  std::atomic<int> attached{0};
  /// Set before the answer that ends the kernel (exit, timeout, interrupt,
  /// death) is sent, and when the broker stops: the kernel takes no more
  /// cells.
  std::atomic<bool> ended{false};
  /// steady_clock nanoseconds when the last cell was answered (0: never).
  std::atomic<int64_t> last_answer_ns{0};
  /// steady_clock nanoseconds when the last cell was handed over (0: never).
  std::atomic<int64_t> last_handed_ns{0};
  /// Cells handed over so far (counted with last_handed_ns).
  std::atomic<int64_t> cells{0};
  /// Cells that waited for the previous cell's checkpoint, and how long
  /// in total (nanoseconds).
  std::atomic<int64_t> checkpoint_waits{0};
  std::atomic<int64_t> checkpoint_wait_ns{0};
  // Set by the registry before the record is shared, then read-only: the
  // process (bwrap's pid when sandboxed), its mode ("project"/"strict") and
  // when it started (steady_clock nanoseconds).
  int64_t pid = 0;
  bool sandboxed = false;
  std::string mode;
  int64_t started_ns = 0;
};

struct kernel_actor_options {
  /// The started process; the actor takes ownership of its descriptors.
  kernel_process proc;
  /// Tools the stub offers (the allow-list).
  std::vector<std::string> tools;
  /// The script catalog's generation the stub was written from (0: no
  /// catalog; the stub never changes). A newer one is written into the
  /// staging dir, and `tools` replaced, before the next cell.
  uint64_t stub_generation = 0;
  /// "session" for persistent kernels.
  std::string mode = "session";
  /// Seconds between SIGTERM and SIGKILL.
  int64_t kill_grace_seconds = 5;
  /// Shared with the registry; never null once spawned.
  std::shared_ptr<kernel_usage> usage;
};

/// Spawns the kernel broker.
caf::actor spawn_kernel_actor(caf::actor_system& sys, services_ptr svc,
                              kernel_actor_options opts);

} // namespace mibyan
