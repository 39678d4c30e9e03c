#include "agent/tool_output_pruning.hpp"

#include <map>

namespace mibyan {

namespace {

// 48213 -> "48,213".
std::string grouped(size_t n) {
  auto s = std::to_string(n);
  for (size_t i = s.size(); i > 3; i -= 3)
    s.insert(i - 3, ",");
  return s;
}

} // namespace

std::string pruned_output_stub(const std::string& tool, size_t size) {
  return "[tool output pruned: " + (tool.empty() ? std::string{"a tool"} : tool)
         + " returned " + grouped(size) + " characters]";
}

prune_stats prune_old_tool_outputs(std::vector<chat_message>& msgs,
                                   size_t keep_last, size_t min_chars) {
  prune_stats stats;
  size_t results = 0;
  for (auto& m : msgs)
    if (m.role == "tool") {
      ++results;
      stats.bytes_before += m.content.size();
    }
  size_t older = results > keep_last ? results - keep_last : 0;
  std::map<std::string, std::string> call_names; // call id -> tool name
  size_t seen = 0;
  for (auto& m : msgs) {
    if (m.role == "assistant") {
      for (auto& c : m.tool_calls)
        call_names[c.id] = c.name;
      continue;
    }
    if (m.role != "tool")
      continue;
    if (seen++ < older && m.content.size() > min_chars) {
      auto name = m.tool_name;
      if (name.empty())
        if (auto it = call_names.find(m.tool_call_id); it != call_names.end())
          name = it->second;
      m.content = pruned_output_stub(name, m.content.size());
      ++stats.pruned;
    }
    stats.bytes_after += m.content.size();
  }
  return stats;
}

} // namespace mibyan
