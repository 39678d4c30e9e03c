// File: actors/tool_invocation.hpp
//
// One actor per tool call. It runs the tool on the runtime's blocking pool
// (never on a scheduler thread), enforces the tool's deadline, and answers
// exactly once:
//   (invoke_atom, tool_request) -> tool_response
// On the deadline or on (interrupt_atom, std::string reason) it sets the
// call's cancel flag (the tool stops its work, e.g. kills its process
// group) and answers at once with an error result; a late result from the
// pool is dropped. The actor quits after answering.
#pragma once

#include "caf/fwd.hpp"

#include "actors/services.hpp"

namespace mibyan {

/// Spawns an invocation actor as a child of `parent` (monitored by it).
caf::actor spawn_tool_invocation(caf::local_actor* parent, services_ptr svc);

} // namespace mibyan
