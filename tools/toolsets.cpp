#include "tools/toolsets.hpp"

#include <algorithm>
#include <set>

#include "config/options.hpp"
#include "tools/registry.hpp"

namespace mibyan {

namespace {

const std::vector<toolset_def>& static_table() {
  // docs/tools.md, "Toolsets". Names of tools Mibyan does not have (vision,
  // browser, ...) resolve to nothing until a tool of that name registers.
  static const std::vector<toolset_def> table{
    {"web", "Web search and page extraction", {"web_search", "web_extract"}, {}},
    {"search", "Web search only", {"web_search"}, {}},
    {"terminal", "Shell commands and background processes",
     {"terminal", "process"}, {}},
    {"file", "Read, write, patch and search files",
     {"read_file", "write_file", "patch", "search_files"}, {}},
    {"skills", "List, view and manage skills",
     {"skills_list", "skill_view", "skill_manage"}, {}},
    {"memory", "Persistent memory files", {"memory"}, {}},
    {"todo", "The session's task plan", {"todo"}, {}},
    {"session_search", "Search past sessions", {"session_search"}, {}},
    {"clarify", "Ask the user a question", {"clarify"}, {}},
    {"cron", "Scheduled jobs (docs/cron.md)", {"cronjob"}, {}},
    {"code_execution", "Run Python scripts that call tools",
     {"execute_code"}, {}},
    {"delegation", "Delegate tasks to subagents", {"delegate_task"}, {}},
    {"vision", "Image analysis", {"vision_analyze"}, {}},
    {"image_gen", "Image generation", {"image_generate"}, {}},
    {"tts", "Text to speech", {"text_to_speech"}, {}},
    {"browser", "Browser automation",
     {"browser_navigate", "browser_snapshot", "browser_click", "browser_type",
      "browser_scroll", "browser_back", "browser_press", "browser_close",
      "browser_get_images", "browser_vision", "browser_console",
      "browser_cdp", "web_search"},
     {}},
    {"debugging", "Terminal plus web and file tools", {"terminal", "process"},
     {"web", "file"}},
    {"safe", "No terminal (not a security sandbox)", {},
     {"web", "vision", "image_gen"}},
    {"coding", "A coding agent's tools",
     {"web_search", "web_extract", "terminal", "process", "read_file",
      "write_file", "patch", "search_files", "vision_analyze", "skills_list",
      "skill_view", "skill_manage", "todo", "memory", "session_search",
      "clarify", "execute_code", "delegate_task"},
     {"browser"}},
    {"mibyan-cli", "Every core tool", core_tool_names(), {}},
  };
  return table;
}

bool is_all(const std::string& n) { return n == "all" || n == "*"; }

// Platform bundles `mibyan-<platform>` resolve to the CLI bundle.
bool is_bundle(const std::string& n) {
  return n.size() > 7 && n.compare(0, 7, "mibyan-") == 0;
}

} // namespace

const std::vector<std::string>& core_tool_names() {
  static const std::vector<std::string> names{
    "clarify", "cronjob", "delegate_task", "execute_code", "memory", "patch", "process",
    "read_file", "search_files", "session_search", "skill_manage",
    "skill_view", "skills_list", "terminal", "todo", "web_extract",
    "web_search", "write_file"};
  return names;
}

std::string canonical_toolset_name(const std::string& name) {
  if (name == "delegate")
    return "delegation";
  if (name == "code" || name == "execute_code")
    return "code_execution";
  if (name == "files")
    return "file";
  if (is_bundle(name))
    return "mibyan-cli";
  return name;
}

toolset_catalog::toolset_catalog() = default;

status toolset_catalog::add(toolset_def def) {
  if (def.name.empty() || is_all(def.name))
    return status::failure(status_code::invalid_argument,
                           "a toolset needs a name other than all/*");
  for (auto& s : static_table())
    if (s.name == def.name)
      return status::failure(status_code::already_exists,
                             "toolset '" + def.name + "' is built in");
  std::lock_guard<std::mutex> guard{mtx_};
  for (auto& d : dynamic_)
    if (d.name == def.name) {
      d = std::move(def);
      return {};
    }
  dynamic_.push_back(std::move(def));
  return {};
}

bool toolset_catalog::remove(const std::string& name) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto i = std::find_if(dynamic_.begin(), dynamic_.end(),
                        [&](const toolset_def& d) { return d.name == name; });
  if (i == dynamic_.end())
    return false;
  dynamic_.erase(i);
  return true;
}

bool toolset_catalog::find(const std::string& name, toolset_def* out) const {
  for (auto& s : static_table())
    if (s.name == name) {
      if (out)
        *out = s;
      return true;
    }
  std::lock_guard<std::mutex> guard{mtx_};
  for (auto& d : dynamic_)
    if (d.name == name) {
      if (out)
        *out = d;
      return true;
    }
  return false;
}

std::vector<std::string> toolset_catalog::names(const tool_registry* reg) const {
  std::set<std::string> out{"all"};
  for (auto& s : static_table())
    out.insert(s.name);
  {
    std::lock_guard<std::mutex> guard{mtx_};
    for (auto& d : dynamic_)
      out.insert(d.name);
  }
  if (reg)
    for (auto t : reg->all())
      out.insert(t->toolset());
  return {out.begin(), out.end()};
}

result<std::vector<std::string>>
toolset_catalog::expand(const tool_registry& reg,
                        const std::vector<std::string>& names) const {
  std::set<std::string> tools;
  std::set<std::string> visited;
  std::vector<std::string> unknown;
  auto registered_toolset = [&](const std::string& n) {
    for (auto t : reg.all())
      if (n == t->toolset())
        return true;
    return false;
  };
  // Depth-first with one shared visited set: cycles and diamonds are
  // silently ignored.
  std::vector<std::string> stack(names.rbegin(), names.rend());
  while (!stack.empty()) {
    auto n = canonical_toolset_name(stack.back());
    stack.pop_back();
    if (!visited.insert(n).second)
      continue;
    if (is_all(n)) {
      for (auto t : reg.all())
        tools.insert(t->name());
      continue;
    }
    toolset_def def;
    bool known = find(n, &def);
    bool own = registered_toolset(n);
    if (!known && !own) {
      unknown.push_back(n);
      continue;
    }
    for (auto& t : def.tools)
      tools.insert(t);
    for (auto t : reg.all())
      if (n == t->toolset())
        tools.insert(t->name());
    for (auto i = def.includes.rbegin(); i != def.includes.rend(); ++i)
      stack.push_back(*i);
  }
  if (!unknown.empty()) {
    std::string valid;
    for (auto& v : this->names(&reg))
      valid += (valid.empty() ? "" : ", ") + v;
    std::string bad;
    for (auto& u : unknown)
      bad += (bad.empty() ? "'" : ", '") + u + "'";
    return result<std::vector<std::string>>::failure(
      status_code::invalid_argument,
      std::string{"unknown toolset"} + (unknown.size() > 1 ? "s " : " ") + bad
        + " (valid toolsets: " + valid + ")");
  }
  std::vector<std::string> out;
  for (auto& t : tools)
    if (reg.find(t) != nullptr)
      out.push_back(t);
  return out;
}

result<std::vector<std::string>>
toolset_catalog::resolve(const tool_registry& reg,
                         const toolset_selection& sel) const {
  auto enabled = expand(reg, sel.enabled.empty()
                               ? std::vector<std::string>{"all"}
                               : sel.enabled);
  if (!enabled)
    return enabled;
  // Disabling a `mibyan-*` bundle removes only its non-core tools.
  std::vector<std::string> sets, bundles;
  for (auto& n : sel.disabled_toolsets)
    (is_bundle(n) ? bundles : sets).push_back(n);
  auto disabled = expand(reg, sets);
  if (!disabled)
    return result<std::vector<std::string>>::failure(
      disabled.code, "agent.disabled_toolsets: " + disabled.error);
  std::set<std::string> drop(disabled->begin(), disabled->end());
  if (auto b = expand(reg, bundles)) {
    auto& core = core_tool_names();
    for (auto& t : *b)
      if (std::find(core.begin(), core.end(), t) == core.end())
        drop.insert(t);
  }
  drop.insert(sel.disabled_tools.begin(), sel.disabled_tools.end());
  std::vector<std::string> out;
  for (auto& t : *enabled)
    if (drop.count(t) == 0)
      out.push_back(t);
  return out;
}

toolset_selection
toolset_catalog::selection_of(const options& cfg,
                              const std::vector<std::string>& requested) {
  toolset_selection sel;
  sel.enabled = requested.empty() ? cfg.agent.toolsets : requested;
  sel.disabled_toolsets = cfg.agent.disabled_toolsets;
  sel.disabled_tools = cfg.agent.disabled_tools;
  return sel;
}

toolset_selection
toolset_catalog::without(toolset_selection base,
                         const std::vector<std::string>& excluded_tools) {
  base.disabled_tools.insert(base.disabled_tools.end(), excluded_tools.begin(),
                             excluded_tools.end());
  return base;
}

result<std::vector<std::string>>
offered_tool_names(const toolset_catalog* cat, const tool_registry& reg,
                   const options& cfg,
                   const std::vector<std::string>& requested) {
  static const toolset_catalog fallback;
  return (cat ? *cat : fallback)
    .resolve(reg, toolset_catalog::selection_of(cfg, requested));
}

} // namespace mibyan
