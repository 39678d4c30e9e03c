// File: actors/kernel.hpp
//
// One actor per Python kernel process: a CAF broker on the middleman's
// epoll thread that owns the child's stdin/stdout/stderr socketpairs and
// the kernel's private RPC socket, so nothing here blocks a scheduler
// thread.
//
// Protocol (untyped broker handle):
//   (exec_atom, exec_cell) -> tool_response
//       Runs one cell and answers with the execute_code result object.
//       Cells queue when one is running. Never fails: a dead kernel is an
//       error result.
//   (interrupt_atom, std::string reason)
//       Kills the kernel; the running cell answers "interrupted".
//   exit (any reason)
//       Kills the process group and removes the staging dir.
//
// RPC frames from the script become tool_requests (`from_script = true`)
// to per-call tool_invocation actors, the same path as direct calls, after
// the token, cell-authority, allow-list, duplicate-id and budget checks
// (docs/execute_code.md, "Per-cell budgets"). Calls still running when the
// cell ends, however it ends, are cancelled.
//
// After the kernel process is gone (exit, death, timeout, interrupt) the
// actor quits; its owner monitors it.
#pragma once

#include <string>
#include <vector>

#include "caf/fwd.hpp"

#include "kernels/kernel_process.hpp"
#include "actors/services.hpp"

namespace mibyan {

struct kernel_actor_options {
  /// The started process; the actor takes ownership of its descriptors.
  kernel_process proc;
  /// Tools the stub offers (the allow-list).
  std::vector<std::string> tools;
  /// "session" for persistent kernels.
  std::string mode = "session";
  /// Seconds between SIGTERM and SIGKILL.
  int64_t kill_grace_seconds = 5;
};

/// Spawns the kernel broker.
caf::actor spawn_kernel_actor(caf::actor_system& sys, services_ptr svc,
                              kernel_actor_options opts);

} // namespace mibyan
