// File: tools/agent/agent_tools.hpp
//
// Factories of the agent tools that keep state beyond one call (memory,
// skills, todo, session_search, clarify, cronjob; docs/tools.md). They run
// through the registry like the core tools and reach their shared state
// through tool_context::agent (tools/agent/agent_tool_state.hpp); without it (a bare
// registry in a unit test) the session-bound ones answer with an error.
#pragma once

#include <memory>

#include "tools/tool.hpp"

namespace mibyan {

class tool_registry;

std::unique_ptr<tool> make_memory_tool();
std::unique_ptr<tool> make_todo_tool();
std::unique_ptr<tool> make_clarify_tool();
std::unique_ptr<tool> make_session_search_tool();
std::unique_ptr<tool> make_skills_list_tool();
std::unique_ptr<tool> make_skill_view_tool();
std::unique_ptr<tool> make_skill_manage_tool();
std::unique_ptr<tool> make_cronjob_tool();

/// Registers all of the above.
void register_agent_tools(tool_registry& reg);

} // namespace mibyan
