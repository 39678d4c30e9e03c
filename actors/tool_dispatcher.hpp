// File: actors/tool_dispatcher.hpp
//
// The tool router: the single entry point for tool calls from the agent
// loop, from execute_code scripts and from `mibyan tool`. Each call gets its
// own tool_invocation actor (so calls never share a thread or a deadline).
//
// Protocol:
//   (invoke_atom, tool_request) -> tool_response
//       Never fails for a tool-level problem (unknown tool, bad args, tool
//       error): those are result objects. Fails only with ec::unavailable
//       during shutdown.
//   (interrupt_atom, interrupt_request)
//       Cancels every running call of that session (each answers with a
//       "cancelled" result), or with `call_id` only the calls with that id,
//       and forwards to the code-execution backend.
#pragma once

#include <optional>

#include "caf/replies_to.hpp"
#include "caf/typed_actor.hpp"

#include "messages/type_ids.hpp"
#include "actors/services.hpp"

namespace mibyan {

/// Anything that answers one tool call (an invocation actor).
using tool_invoker_actor = caf::typed_actor<
  caf::replies_to<invoke_atom, tool_request>::with<tool_response>>;

using tool_dispatcher_actor = caf::typed_actor<
  caf::replies_to<invoke_atom, tool_request>::with<tool_response>,
  caf::reacts_to<interrupt_atom, interrupt_request>>;

/// Spawns the dispatcher. `code_exec` (may be invalid) receives
/// `execute_code` calls with the same protocol as the dispatcher, and
/// applies script_guard_response itself.
tool_dispatcher_actor spawn_tool_dispatcher(caf::actor_system& sys,
                                            services_ptr svc,
                                            tool_dispatcher_actor code_exec);

/// The whole-script approval guard of `execute_code` (docs/approvals.md):
/// the "blocked" result when the script may not run, else nothing. Never
/// blocks; any thread.
std::optional<tool_response> script_guard_response(const runtime_services& svc,
                                                   const tool_request& req);

} // namespace mibyan
