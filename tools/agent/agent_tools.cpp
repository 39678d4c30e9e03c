#include "tools/agent/agent_tools.hpp"

#include "tools/registry.hpp"

namespace mibyan {

void register_agent_tools(tool_registry& reg) {
  reg.add(make_memory_tool());
  reg.add(make_todo_tool());
  reg.add(make_clarify_tool());
  reg.add(make_session_search_tool());
  reg.add(make_skills_list_tool());
  reg.add(make_skill_view_tool());
  reg.add(make_skill_manage_tool());
  reg.add(make_cronjob_tool());
}

} // namespace mibyan
