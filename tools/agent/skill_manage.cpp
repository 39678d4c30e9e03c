// skill_manage (docs/tools.md, "Skills"): create, edit, patch and delete
// skills and write or remove their supporting files, in
// $MIBYAN_HOME/skills only (skills.external_dirs are read-only). Every
// write is atomic; paths never leave the skill's directory; calls are
// serialised by a lock file in the skills directory, so concurrent
// patches from several threads or processes all persist. With a shared
// store (tools/agent/skill_sync.hpp) the change is made on the synced local
// copy and written to the store compare-and-set.
#include <filesystem>

#include "base/private_file.hpp"
#include "config/options.hpp"
#include "tools/agent/agent_tool_state.hpp"
#include "tools/agent/agent_tools.hpp"
#include "tools/agent/skill_sync.hpp"
#include "tools/file_io.hpp"
#include "tools/file_lock.hpp"
#include "tools/fuzzy_match.hpp"
#include "tools/agent/memory_store.hpp"
#include "tools/agent/skills.hpp"

namespace fs = std::filesystem;

namespace mibyan {

namespace {

json::value ok(std::string message, const std::string& path) {
  json::value r;
  r["success"] = true;
  r["message"] = std::move(message);
  r["path"] = path;
  return r;
}

class skill_manage_tool final : public tool {
public:
  const char* name() const override { return "skill_manage"; }
  const char* toolset() const override { return "skills"; }

  std::string description() const override {
    return "Create and maintain skills: reusable instructions for recurring "
           "tasks, kept in SKILL.md files. action=create (name, content = "
           "the full SKILL.md, optional category), edit (replace SKILL.md "
           "with content), patch (old_string -> new_string in SKILL.md or "
           "in file_path; replace_all for every occurrence), delete, "
           "write_file (file_path under references/, templates/, scripts/ "
           "or assets/, file_content), remove_file (file_path). SKILL.md "
           "starts with YAML frontmatter between '---' lines holding name "
           "and description (optionally tags, related_skills, "
           "required_environment_variables), then the instructions.";
  }

  json::value schema() const override {
    json::value action = schema_property("string", "What to do.");
    action["enum"] = json::array{"create", "patch", "edit", "delete",
                                 "write_file", "remove_file"};
    json::value props;
    props["action"] = std::move(action);
    props["name"] = schema_property(
      "string", "Skill name: lowercase letters, digits, '.', '_', '-'; at "
                "most 64 characters.");
    props["content"] = schema_property("string",
                                       "The full SKILL.md (create, edit).");
    props["old_string"] = schema_property("string", "Patch: text to find.");
    props["new_string"] = schema_property("string",
                                          "Patch: replacement text.");
    props["replace_all"] = schema_property(
      "boolean", "Patch: replace every occurrence (default false).");
    props["category"] = schema_property(
      "string", "Create: a category directory to file the skill under.");
    props["file_path"] = schema_property(
      "string", "A supporting file relative to the skill directory.");
    props["file_content"] = schema_property("string",
                                            "write_file: the file's content.");
    props["absorbed_into"] = schema_property(
      "string", "Delete: the skill that now covers this one (noted in the "
                "result).");
    json::value s;
    s["type"] = "object";
    s["properties"] = std::move(props);
    s["required"] = json::array{"action", "name"};
    return s;
  }

  json::value run(const json::value& args,
                  const tool_context& ctx) const override {
    auto action = args.get_string("action");
    auto name = args.get_string("name");
    if (auto valid = check_skill_name(name); !valid.ok())
      return error_result(valid.error);
    auto home = mibyan_home_of(ctx);
    auto local = local_skills_root(home);
    // Every change is a read-modify-write of the skills tree: one lock for
    // all of it, shared with other threads and processes on this home
    // (tools/file_lock.hpp), taken before the skill is looked up.
    if (auto made = make_private_dirs(local); !made.ok())
      return error_result(made.error);
    file_lock lock{skills_lock_path(home), "the skills directory"};
    if (!lock.error().empty())
      return error_result(lock.error());
    // A shared store (docs/storage.md, "Per-user state"): bring the local
    // copy up to date first, and share the change after it.
    auto* shared = ctx.agent != nullptr ? ctx.agent->user_state.get()
                                        : nullptr;
    if (shared != nullptr)
      if (auto pulled = sync_skills_locked(home, *shared); !pulled)
        return error_result("cannot read the shared skills (" + pulled.error
                            + "); nothing was changed"
                            + (is_retryable(pulled.code) ? "; retry later"
                                                         : ""));
    auto r = change(args, action, name, home, local, *ctx.cfg);
    if (shared == nullptr || !r.get_bool("success", false))
      return r;
    auto pushed = sync_skills_locked(home, *shared);
    if (!pushed)
      return error_result(
        "the change to skill '" + name + "' was made on this gateway but "
        "could not be shared (" + pushed.error + "); it is shared by the "
        "next skills call once the store is reachable: do not repeat it");
    for (auto& f : *pushed)
      if (f.rfind(name + "/", 0) == 0
          || f.find("/" + name + "/") != std::string::npos)
        return error_result(
          "skill '" + name + "' was changed on another gateway at the same "
          "time; your change was not kept (" + f + " has their version). "
          "View the skill again and redo the change.");
    return r;
  }

private:
  static json::value change(const json::value& args,
                            const std::string& action,
                            const std::string& name, const std::string& home,
                            const std::string& local, const options& cfg) {
    auto existing = find_skill(skill_roots(home, cfg), name);
    if (action == "create")
      return create(args, name, local, existing.has_value());
    if (!existing)
      return error_result("Skill '" + name + "' not found.");
    if (existing->external)
      return error_result("Skill '" + name + "' lives in an external "
                          "directory (" + existing->root
                          + "), which is read-only.");
    auto& dir = existing->dir;
    if (action == "edit") {
      auto content = args.get_string("content");
      if (auto parsed = parse_skill_md(content); !parsed.ok())
        return error_result(parsed.error);
      if (auto w = atomic_write(existing->skill_md, content); !w.ok())
        return error_result(w.error);
      return ok("Skill '" + name + "' updated.", existing->skill_md);
    }
    if (action == "patch") {
      auto old_s = args.get_string("old_string");
      if (old_s.empty())
        return error_result("old_string is required for patch");
      auto file = args.get_string("file_path");
      std::string path = existing->skill_md;
      if (!file.empty()) {
        auto p = skill_file_path(dir, file, false);
        if (!p)
          return error_result(p.error);
        path = *p;
      }
      auto text = read_whole_file(path, max_skill_md_chars * 4
                                            + max_skill_file_bytes);
      if (!text)
        return error_result(text.error);
      auto out = fuzzy_replace(*text, old_s, args.get_string("new_string"),
                               args.get_bool("replace_all", false));
      if (out.not_found)
        return error_result("old_string not found in " + path + "."
                            + closest_section(*text, old_s));
      if (!out.error.empty())
        return error_result(out.error);
      if (path == existing->skill_md)
        if (auto parsed = parse_skill_md(out.content); !parsed.ok())
          return error_result("the patched SKILL.md is invalid: "
                              + parsed.error);
      if (auto w = atomic_write(path, out.content); !w.ok())
        return error_result(w.error);
      auto r = ok("Skill '" + name + "' patched.", path);
      r["replacements"] = static_cast<int64_t>(out.replacements);
      return r;
    }
    if (action == "delete") {
      std::error_code ec;
      fs::remove_all(dir, ec);
      if (ec)
        return error_result("cannot delete " + dir + ": " + ec.message());
      auto r = ok("Skill '" + name + "' deleted.", dir);
      if (auto into = args.get_string("absorbed_into"); !into.empty())
        r["absorbed_into"] = into;
      return r;
    }
    if (action == "write_file" || action == "remove_file") {
      auto file = args.get_string("file_path");
      auto p = skill_file_path(dir, file, true);
      if (!p)
        return error_result(p.error);
      if (action == "remove_file") {
        std::error_code ec;
        if (!fs::is_regular_file(*p, ec))
          return error_result("no file " + file + " in skill '" + name + "'");
        fs::remove(*p, ec);
        if (ec)
          return error_result("cannot remove " + *p + ": " + ec.message());
        return ok("Removed " + file + " from skill '" + name + "'.", *p);
      }
      auto content = args.find("file_content");
      if (content == nullptr || !content->is_string())
        return error_result("file_content is required for write_file");
      if (content->as_string().size() > max_skill_file_bytes)
        return error_result("file_content is larger than 1 MiB");
      if (auto w = atomic_write(*p, content->as_string()); !w.ok())
        return error_result(w.error);
      return ok("Wrote " + file + " in skill '" + name + "'.", *p);
    }
    return error_result("Unknown action '" + action
                        + "': use create, patch, edit, delete, write_file "
                          "or remove_file.");
  }

  static json::value create(const json::value& args, const std::string& name,
                            const std::string& local, bool exists) {
    if (exists)
      return error_result("Skill '" + name + "' already exists; use edit or "
                          "patch to change it.");
    auto content = args.get_string("content");
    if (auto parsed = parse_skill_md(content); !parsed.ok())
      return error_result(parsed.error);
    auto category = args.get_string("category");
    std::string dir = local;
    if (!category.empty()) {
      if (auto valid = check_skill_name(category); !valid.ok())
        return error_result("category: " + valid.error);
      dir += "/" + category;
    }
    dir += "/" + name;
    auto path = dir + "/SKILL.md";
    if (auto w = atomic_write(path, content); !w.ok())
      return error_result(w.error);
    return ok("Skill '" + name + "' created.", path);
  }
};

} // namespace

std::unique_ptr<tool> make_skill_manage_tool() {
  return std::make_unique<skill_manage_tool>();
}

} // namespace mibyan
