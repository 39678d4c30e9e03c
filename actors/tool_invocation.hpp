// File: actors/tool_invocation.hpp
//
// One actor per tool call, whoever made it: the model (through the tool
// dispatcher) or an execute_code script (through its kernel broker). The
// invocation owns the call's deadline, its cancel flag and its one answer:
//   * it parses the arguments once and asks the tool for its deadline;
//   * a tool that declares itself non-blocking (tool::non_blocking) runs in
//     the invocation's own handler; any other runs on the runtime's
//     blocking pool, and the pool thread sends the result back with one
//     message (no request/response);
//   * on the deadline or on (interrupt_atom, std::string reason) it sets the
//     call's cancel flag (the tool stops its work, e.g. kills its process
//     group) and answers at once; a late result from the pool is dropped;
//   * it answers exactly once and quits. A failure inside it (an exception
//     escaping a handler) ends only this actor, and still answers (with an
//     error result) for a script's call.
//
// Two hostings of the same actor:
//   * spawn_tool_invocation: a scheduled actor, child of the dispatcher,
//     answering (invoke_atom, tool_request) -> tool_response;
//   * spawn_script_invocation: a broker without connections on the
//     middleman's I/O thread, where the kernel broker that spawns it runs,
//     so spawning it, its handler and its answer to the kernel broker are
//     plain function calls and queue entries on that thread, not thread
//     hand-offs (docs/execute_code.md, "Script tool calls"). It answers the
//     kernel broker with (done_atom, uint64_t seq, std::string result_json).
//     A non-blocking tool therefore runs on the I/O thread; such a tool must
//     take microseconds (tools/tool.hpp).
#pragma once

#include <cstdint>

#include "caf/fwd.hpp"

#include "actors/services.hpp"
#include "messages/tool_request.hpp"

namespace mibyan {

/// Spawns an invocation actor as a child of `parent` (monitored by it).
caf::actor spawn_tool_invocation(caf::local_actor* parent, services_ptr svc);

/// Spawns the invocation of a script's call `req` (already admitted by the
/// kernel broker's checks) on the middleman's I/O thread. Its answer goes
/// to `reply_to` (held weakly) as (done_atom, seq, result_json); an
/// interrupt ends it without an answer (the kernel broker has let the call
/// go). Returns the invocation, to interrupt it.
caf::actor spawn_script_invocation(caf::actor_system& sys, services_ptr svc,
                                   tool_request req, caf::actor_addr reply_to,
                                   uint64_t seq);

} // namespace mibyan
