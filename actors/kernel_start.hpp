// File: actors/kernel_start.hpp
//
// Starting a session kernel off the scheduler: the job the kernel registry
// (actors/kernel_registry.cpp) queues on the blocking pool for each new
// kernel. It resolves the interpreter (a cache hit, or running a wrapper
// such as a pyenv shim), stages the kernel's files, forks and execs, and
// spawns the kernel's broker (actors/kernel.hpp).
//
// Thread: `run_kernel_start` blocks (milliseconds, a shim tens of them, at
// most a few seconds) and must run on a blocking-pool thread, never on a
// scheduler or the middleman's thread. `interpreter_for` blocks only on a
// cache miss.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "caf/actor.hpp"

#include "actors/services.hpp"
#include "actors/warm_kernels.hpp"

namespace mibyan {

struct kernel_usage;

/// Shared by the registry and one start job, under `mtx`. The job stores
/// the broker it spawned in `handle`; the registry's end sets
/// `registry_gone` and stops `handle` if set. So a broker the registry
/// never heard of is stopped exactly once: by the registry's end if it was
/// spawned before, by the job (which then spawns nothing) if after.
struct kernel_start_slot {
  std::mutex mtx;
  bool registry_gone = false;
  caf::actor handle;
};

/// What a start needs, copied from the registry: the job never touches it.
struct kernel_start_plan {
  services_ptr svc;
  kernel_shape shape;
  std::string default_python;
  std::vector<std::string> tools;
  /// When `shape`'s interpreter cannot start (a broken venv, a wrong
  /// `code_execution.python`), try `default_python`, then python3 on
  /// PATH, and say so in the note. Spares do not fall back.
  bool fallback = false;
};

/// The interpreter a kernel of `shape` runs: from the cache while nothing
/// that selects the version changed (kernels/interpreter_cache.hpp).
std::string interpreter_for(const runtime_services& svc,
                            const std::string& default_python,
                            const kernel_shape& shape);

/// Called once per start, unless the registry ended first: the broker
/// (null on failure), the interpreter tried, the error ("" on success),
/// the fallback note ("" if none).
using kernel_start_report = std::function<void(
  caf::actor handle, std::string resolved, std::string error,
  std::string note)>;

/// Runs one start (blocking; see above). The broker shares `usage` with
/// the registry. If `slot.registry_gone` is set when the process is up, the
/// process is killed and nothing is reported.
void run_kernel_start(caf::actor_system& sys, const kernel_start_plan& plan,
                      std::shared_ptr<kernel_usage> usage,
                      kernel_start_slot& slot,
                      const kernel_start_report& report);

} // namespace mibyan
