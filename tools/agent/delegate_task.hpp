// File: tools/agent/delegate_task.hpp
//
// The schema and description of `delegate_task` (toolset `delegation`,
// docs/tools.md). The tool is an agent-loop tool: the conversation actor
// runs its calls itself, as child conversations (actors/
// conversation_delegate.cpp). Called any other way (`mibyan tool`, a
// script) it answers with an error result.
#pragma once

#include <memory>

#include "tools/tool.hpp"

namespace mibyan {

struct options;

/// The delegate_task tool; its description names the live limits of
/// `cfg` (delegation.max_concurrent_children, delegation.max_iterations).
std::unique_ptr<tool> make_delegate_task_tool(const options& cfg);

} // namespace mibyan
