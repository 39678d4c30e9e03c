// File: kernels/process_launcher.hpp
//
// How the runtime starts child processes: the kernel registry starts
// Python kernels through `start_kernel`, the terminal and search tools run
// commands through `run`. The runtime's services hold one
// (actors/services.hpp, `launcher`); the real one calls spawn_kernel
// (kernels/kernel_process.hpp) and run_subprocess (base/subprocess.hpp),
// and tests hand in their own to count, refuse or fake starts.
//
// Thread safety: implementations are called from any thread at once (the
// registry's scheduler thread, blocking-pool threads) and must be safe for
// that. `run` blocks until the child is done: never call it on a CAF
// scheduler thread.
#pragma once

#include <memory>

#include "base/status.hpp"
#include "base/subprocess.hpp"
#include "kernels/kernel_process.hpp"

namespace mibyan {

class process_launcher {
public:
  virtual ~process_launcher() = default;

  /// Runs a command to completion (the contract of run_subprocess).
  virtual subprocess_result run(const subprocess_options& opts) const = 0;

  /// Starts a kernel process (the contract of spawn_kernel). On failure
  /// nothing is left behind and the status says why.
  virtual result<kernel_process>
  start_kernel(const kernel_spawn_options& opts) const = 0;
};

using launcher_ptr = std::shared_ptr<const process_launcher>;

/// The launcher that starts real processes. One shared instance; never
/// null.
launcher_ptr real_process_launcher();

/// `launcher` when set, else the real one (for callers whose services may
/// come from a unit test that set none).
const process_launcher& launcher_or_real(const process_launcher* launcher);

} // namespace mibyan
