#include "tools/agent/agent_tool_state.hpp"

#include "tools/client_files.hpp"
#include "tools/registry.hpp"

#include <algorithm>

namespace mibyan {

void agent_tool_state::set_clarify(clarify_callback cb, bool serialised) {
  std::lock_guard<std::mutex> guard{mtx_};
  clarify_ = std::move(cb);
  clarify_serialised_ = serialised;
}

clarify_callback agent_tool_state::clarify_for(const std::string& session_id,
                                              bool* serialised) const {
  if (channels && !session_id.empty())
    if (auto ch = channels->find(session_id)) {
      if (serialised != nullptr)
        *serialised = false;
      return std::move(ch->clarify);
    }
  return clarify(serialised);
}

clarify_callback agent_tool_state::clarify(bool* serialised) const {
  std::lock_guard<std::mutex> guard{mtx_};
  if (serialised != nullptr)
    *serialised = clarify_serialised_;
  return clarify_;
}

void agent_tool_state::activate_skill(const std::string& session_id,
                                      const std::string& skill,
                                      std::vector<std::string> env_names) {
  std::lock_guard<std::mutex> guard{mtx_};
  skills_[session_id][skill] = std::move(env_names);
}

std::vector<std::string>
agent_tool_state::active_skills(const std::string& session_id) const {
  std::lock_guard<std::mutex> guard{mtx_};
  std::vector<std::string> out;
  if (auto i = skills_.find(session_id); i != skills_.end())
    for (auto& [name, env] : i->second)
      out.push_back(name);
  return out;
}

void agent_tool_state::inherit_skills(const std::string& from,
                                      const std::string& to) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto i = skills_.find(from);
  if (i == skills_.end() || from == to)
    return;
  auto copy = i->second;
  auto& dst = skills_[to];
  for (auto& [name, env] : copy)
    dst.emplace(name, env);
}

std::vector<std::string>
agent_tool_state::skill_env(const std::string& session_id) const {
  std::set<std::string> names;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (auto i = skills_.find(session_id); i != skills_.end())
      for (auto& [name, env] : i->second)
        names.insert(env.begin(), env.end());
  }
  return {names.begin(), names.end()};
}

bool agent_tool_state::todos(const std::string& session_id,
                             json::value* out) const {
  std::lock_guard<std::mutex> guard{mtx_};
  auto i = todos_.find(session_id);
  if (i == todos_.end())
    return false;
  if (out)
    *out = i->second;
  return true;
}

void agent_tool_state::set_todos(const std::string& session_id,
                                 json::value list) {
  std::lock_guard<std::mutex> guard{mtx_};
  todos_[session_id] = std::move(list);
}

void agent_tool_state::forget_session(const std::string& session_id) {
  std::lock_guard<std::mutex> guard{mtx_};
  skills_.erase(session_id);
  todos_.erase(session_id);
  files_.erase(session_id);
  tools_.erase(session_id);
}

void agent_tool_state::set_session_tools(
  const std::string& session_id, std::shared_ptr<const tool_registry> tools) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (tools)
    tools_[session_id] = std::move(tools);
  else
    tools_.erase(session_id);
}

std::shared_ptr<const tool_registry>
agent_tool_state::session_tools(const std::string& session_id) const {
  std::lock_guard<std::mutex> guard{mtx_};
  auto it = tools_.find(session_id);
  return it == tools_.end() ? nullptr : it->second;
}

void agent_tool_state::set_client_files(
  const std::string& session_id,
  std::shared_ptr<const client_file_access> files) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (files)
    files_[session_id] = std::move(files);
  else
    files_.erase(session_id);
}

std::shared_ptr<const client_file_access>
agent_tool_state::client_files(const std::string& session_id) const {
  std::lock_guard<std::mutex> guard{mtx_};
  auto it = files_.find(session_id);
  return it == files_.end() ? nullptr : it->second;
}

std::vector<std::string> passthrough_for(const std::vector<std::string>& base,
                                         const agent_tool_state* state,
                                         const std::string& session_id) {
  if (state == nullptr || session_id.empty())
    return base;
  auto extra = state->skill_env(session_id);
  if (extra.empty())
    return base;
  std::vector<std::string> out = base;
  for (auto& n : extra)
    if (std::find(out.begin(), out.end(), n) == out.end())
      out.push_back(n);
  return out;
}

} // namespace mibyan
