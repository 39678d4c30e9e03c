// skills_list and skill_view (docs/tools.md, "Skills"). Viewing a skill
// makes it active in the session: its required_environment_variables are
// then passed through to the session's terminal and execute_code runs
// (tools/agent/agent_tool_state.hpp).
#include <set>

#include "tools/agent/agent_tool_state.hpp"
#include "tools/agent/agent_tools.hpp"
#include "tools/file_io.hpp"
#include "tools/agent/skill_sync.hpp"
#include "tools/agent/skills.hpp"

namespace mibyan {

namespace {

// With a shared store (tools/agent/skill_sync.hpp) the local copy is
// brought up to date first; a store that cannot be reached leaves the copy
// as it is, and the result says so ("" when all is well).
std::string refresh(const tool_context& ctx) {
  if (ctx.agent == nullptr || !ctx.agent->user_state)
    return {};
  auto r = sync_skills(mibyan_home_of(ctx), *ctx.agent->user_state);
  if (r)
    return {};
  return "the shared skills could not be read (" + r.error
         + "); this is this gateway's copy from its last sync";
}

json::value strings(const std::vector<std::string>& xs) {
  json::value out = json::value::make_array();
  for (auto& x : xs)
    out.push_back(x);
  return out;
}

class skills_list_tool final : public tool {
public:
  const char* name() const override { return "skills_list"; }
  const char* toolset() const override { return "skills"; }

  std::string description() const override {
    return "List the available skills (reusable instructions for recurring "
           "tasks) with their descriptions, optionally of one category. "
           "Load one with skill_view before doing a task it covers.";
  }

  json::value schema() const override {
    json::value props;
    props["category"] = schema_property("string",
                                        "Only skills of this category.");
    json::value s;
    s["type"] = "object";
    s["properties"] = std::move(props);
    return s;
  }

  bool parallel_safe() const override { return true; }

  json::value run(const json::value& args,
                  const tool_context& ctx) const override {
    auto warning = refresh(ctx);
    auto category = args.get_string("category");
    json::value list = json::value::make_array();
    std::set<std::string> categories;
    for (auto& s : scan_skills(skill_roots(mibyan_home_of(ctx), *ctx.cfg))) {
      if (!s.category.empty())
        categories.insert(s.category);
      if (!category.empty() && s.category != category)
        continue;
      json::value v;
      v["name"] = s.name;
      v["description"] = s.description;
      v["category"] = s.category;
      list.push_back(std::move(v));
    }
    json::value r;
    r["success"] = true;
    r["count"] = static_cast<int64_t>(list.size());
    r["skills"] = std::move(list);
    r["categories"] = strings({categories.begin(), categories.end()});
    r["hint"] = r.get_int("count", 0) == 0
                  ? "No skills yet. Create one with skill_manage "
                    "(action=create) when you find a reusable procedure."
                  : "Load a skill with skill_view(name) before using it.";
    if (!warning.empty())
      r["warning"] = warning;
    return r;
  }
};

class skill_view_tool final : public tool {
public:
  const char* name() const override { return "skill_view"; }
  const char* toolset() const override { return "skills"; }

  std::string description() const override {
    return "Load a skill: its full SKILL.md instructions and the list of "
           "its supporting files. With file_path, read one supporting file "
           "(under references/, templates/, scripts/ or assets/). Loading "
           "a skill makes the environment variables it requires available "
           "to terminal and execute_code for the rest of this session.";
  }

  json::value schema() const override {
    json::value props;
    props["name"] = schema_property("string", "The skill's name.");
    props["file_path"] = schema_property(
      "string", "A supporting file, relative to the skill directory.");
    json::value s;
    s["type"] = "object";
    s["properties"] = std::move(props);
    s["required"] = json::array{"name"};
    return s;
  }

  json::value run(const json::value& args,
                  const tool_context& ctx) const override {
    auto name = args.get_string("name");
    auto warning = refresh(ctx);
    auto roots = skill_roots(mibyan_home_of(ctx), *ctx.cfg);
    auto skill = find_skill(roots, name);
    if (!skill) {
      std::string names;
      for (auto& s : scan_skills(roots))
        names += (names.empty() ? "" : ", ") + s.name;
      return error_result("Skill '" + name + "' not found. Available: "
                          + (names.empty() ? std::string{"none"} : names)
                          + (warning.empty() ? "" : " (" + warning + ")"));
    }
    auto file = args.get_string("file_path");
    if (!file.empty()) {
      auto path = skill_file_path(skill->dir, file, true);
      if (!path)
        return error_result(path.error);
      auto text = read_whole_file(*path, max_skill_file_bytes);
      if (!text)
        return error_result(text.error);
      json::value r;
      r["success"] = true;
      r["name"] = skill->name;
      r["file_path"] = file;
      r["path"] = *path;
      r["content"] = *text;
      if (!warning.empty())
        r["warning"] = warning;
      return r;
    }
    auto text = read_whole_file(skill->skill_md, 4 * max_skill_md_chars);
    if (!text)
      return error_result(text.error);
    if (ctx.agent && !ctx.session_id.empty())
      ctx.agent->activate_skill(ctx.session_id, skill->name,
                                skill->required_env);
    json::value r;
    r["success"] = true;
    r["name"] = skill->name;
    r["description"] = skill->description;
    r["category"] = skill->category;
    r["tags"] = strings(skill->tags);
    r["related_skills"] = strings(skill->related_skills);
    r["content"] = *text;
    r["path"] = skill->skill_md;
    r["skill_dir"] = skill->dir;
    r["linked_files"] = strings(skill_linked_files(skill->dir));
    r["required_environment_variables"] = strings(skill->required_env);
    r["usage_hint"] = "Follow the instructions in content. Read a linked "
                      "file with skill_view(name, file_path).";
    if (!warning.empty())
      r["warning"] = warning;
    return r;
  }
};

} // namespace

std::unique_ptr<tool> make_skills_list_tool() {
  return std::make_unique<skills_list_tool>();
}

std::unique_ptr<tool> make_skill_view_tool() {
  return std::make_unique<skill_view_tool>();
}

} // namespace mibyan
