// File: actors/kernel_registry.hpp
//
// The execute_code backend: owns every session kernel of this node, keyed
// by (session, mode, interpreter, cwd, tool set), and runs cells on them.
//
// Protocol (a superset of the dispatcher's, so the dispatcher can route
// `execute_code` here):
//   (invoke_atom, tool_request) -> tool_response
//       Validates the arguments (code, reset), acquires or spawns the kernel
//       (reusing a pre-started one when it fits), runs the cell. Never fails:
//       every problem is an error result.
//   (interrupt_atom, interrupt_request)
//       Interrupts the running cells of that session (their kernels die).
//   (dispose_atom, std::string owner)
//       Kills all kernels of `owner` and of its subagents
//       ("<owner>::child::<id>"). Used when a session or subagent ends.
//   (stats_atom) -> std::string
//       JSON: {"kernels": N, "prestarted": N, "spawned": N, "evicted": N,
//       "reaped": N}, for tests and monitoring.
//   (checkpoint_atom) -> bool
//       Every session kernel with checkpoints on takes a checkpoint (after
//       its running cell) and stores it; true once all are stored, false
//       when one could not be (drain: docs/cluster.md).
//   (kernels_atom) -> std::vector<kernel_info>
//       The session kernels alive now (not the pre-started spares), for the
//       operator console. The memory of each is read by the caller, off
//       the scheduler (runtime/runtime_ops.cpp).
//
// Limits: `code_execution.max_session_kernels` live top-level kernels (the
// least recently used idle one is evicted; never one running a cell;
// subagent kernels are exempt), `kernel_idle_timeout` (reaped by a timer),
// `prestart_kernels` kernels kept ready for new sessions.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "caf/fwd.hpp"
#include "caf/replies_to.hpp"
#include "caf/typed_actor.hpp"

#include "actors/tool_dispatcher.hpp"
#include "actors/services.hpp"

namespace mibyan {

class warm_kernel_index;
struct kernel_actor_options; // actors/kernel.hpp

/// What spawns the actor of a started kernel: spawn_kernel_actor (the
/// broker), or in tests an actor that speaks the broker's cell protocol and
/// keeps the options' usage record the way the broker does (kernel_usage's
/// contract, actors/kernel.hpp).
using kernel_actor_factory = std::function<caf::actor(
  caf::actor_system&, services_ptr, kernel_actor_options)>;

using kernel_registry_actor = tool_dispatcher_actor::extend<
  caf::reacts_to<dispose_atom, std::string>,
  caf::replies_to<stats_atom>::with<std::string>,
  caf::replies_to<kernels_atom>::with<std::vector<kernel_info>>,
  caf::replies_to<checkpoint_atom>::with<bool>>;

/// Spawns the registry. `python` is the interpreter for project mode (""
/// = the active venv/conda env's, else `default_python`), `default_python`
/// the one for strict mode and for the fallback. Both are names or paths,
/// resolved only when a kernel starts (kernels/interpreter_cache.hpp).
/// `warm` (optional) receives the index of its running kernels, for the
/// warm-cell fast path of the runtime's call facade
/// (actors/warm_kernels.hpp). Kernel processes start through
/// `svc->launcher`; `spawn_kernel` (empty: spawn_kernel_actor) spawns the
/// actor that owns a started one (tests spawn a scripted actor instead of
/// the broker).
kernel_registry_actor
spawn_kernel_registry(caf::actor_system& sys, services_ptr svc,
                      std::string python, std::string default_python,
                      std::shared_ptr<warm_kernel_index>* warm = nullptr,
                      kernel_actor_factory spawn_kernel = {});

} // namespace mibyan
