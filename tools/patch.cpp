// The patch tool: targeted edits of existing files.
//
// Mode "replace" swaps old_string for new_string in one file, using the
// fuzzy matcher (tools/fuzzy_match.hpp). Mode "patch" applies a V4A
// multi-file patch (tools/v4a_patch.hpp): every section is planned and
// checked in memory first, and files are written only when the whole patch
// applies, so a bad hunk leaves every file untouched.
//
// Every write is atomic and read back to verify it. The result carries a
// unified diff of what changed.
//
// Failed matches are counted per (session, path); from the third failure in
// a row on one path the hint tells the model to stop retrying blindly. The
// counter map is bounded (4,096 entries, dropped wholesale when full).

#include <algorithm>
#include <map>
#include <mutex>
#include <unordered_map>

#include <sys/stat.h>
#include <unistd.h>

#include "config/options.hpp"
#include "tools/approval_gate.hpp"
#include "tools/client_files.hpp"
#include "tools/core_tools.hpp"
#include "tools/file_checkpointer.hpp"
#include "tools/file_io.hpp"
#include "tools/fuzzy_match.hpp"
#include "tools/lint_check.hpp"
#include "tools/path_policy.hpp"
#include "tools/read_tracker.hpp"
#include "tools/unified_diff.hpp"
#include "tools/v4a_patch.hpp"
#include "base/strings.hpp"

namespace mibyan {

namespace {

// Largest file the patch tool edits (it holds the file in memory).
constexpr size_t max_patch_bytes = 64 * 1024 * 1024;
constexpr size_t max_failure_entries = 4096;

json::value failure(std::string message) {
  json::value out;
  out["success"] = false;
  out["error"] = std::move(message);
  return out;
}

void dedupe(std::vector<std::string>& xs) {
  std::vector<std::string> out;
  for (auto& x : xs)
    if (std::find(out.begin(), out.end(), x) == out.end())
      out.push_back(x);
  xs = std::move(out);
}

std::string diff_label(const char* side, const std::string& path) {
  return std::string{side} + (path.front() == '/' ? "" : "/") + path;
}

json::value string_array(const std::vector<std::string>& xs) {
  json::value out = json::value::make_array();
  for (auto& x : xs)
    out.push_back(x);
  return out;
}

// Counts consecutive failed matches per (session, path).
class failure_counter {
public:
  int fail(const std::string& key) {
    std::lock_guard<std::mutex> guard{mtx_};
    if (counts_.size() >= max_failure_entries && !counts_.count(key))
      counts_.clear();
    return ++counts_[key];
  }

  void reset(const std::string& key) {
    std::lock_guard<std::mutex> guard{mtx_};
    counts_.erase(key);
  }

private:
  std::mutex mtx_;
  std::unordered_map<std::string, int> counts_;
};

// Whether `path` (absolute) may be modified by this call and, if so, the
// approval key its write needs: one pass over the path policy
// (tools/path_policy.hpp, write_policy_of).
write_policy modification_policy(const std::string& path,
                                 const json::value& args,
                                 const tool_context& ctx) {
  return write_policy_of(path, mibyan_home_of(ctx),
                         args.get_bool("cross_profile", false));
}

// Reads an existing text file for editing, or explains why it cannot. A
// session with client file access (tools/client_files.hpp) reads the
// client's text of a file that exists on disk (the editor's buffer).
std::optional<std::string> load_for_edit(const tool_context& ctx,
                                         const std::string& path,
                                         std::string& err) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    err = "File not found: " + path;
    return std::nullopt;
  }
  if (S_ISDIR(st.st_mode)) {
    err = "Path is a directory, not a file: " + path;
    return std::nullopt;
  }
  std::optional<std::string> text;
  auto files = client_files_of(ctx);
  if (files && files->read) {
    auto got = files->read(path, ctx.cancelled);
    if (!got) {
      err = "Cannot read " + path + " through the editor: " + got.error;
      return std::nullopt;
    }
    if (got->size() > max_patch_bytes) {
      err = "File too large to patch: " + path;
      return std::nullopt;
    }
    text = std::move(*got);
  } else {
    auto read = read_whole_file(path, max_patch_bytes);
    if (!read)
      err = std::move(read.error);
    text = std::move(read.value);
  }
  if (!text)
    return std::nullopt;
  if (looks_binary(std::string_view{*text}.substr(0, 8192))) {
    err = "Binary file, cannot patch: " + path;
    return std::nullopt;
  }
  return text;
}

// Writes `content` atomically and reads it back; through the client when
// the session has client file access (the client's write is its own
// confirmation). Reports the edit to the session's change hook.
std::string write_verified(const tool_context& ctx, const std::string& path,
                           const std::optional<std::string>& before,
                           const std::string& content) {
  auto files = client_files_of(ctx);
  if (files && files->write) {
    if (auto st = files->write(path, content, ctx.cancelled); !st)
      return "Cannot write " + path + " through the editor: " + st.error;
  } else {
    auto w = atomic_write(path, content);
    if (!w.ok())
      return w.error;
    // The file at `path` must still be the one written, with its size:
    // another process that replaced or resized it in the meantime is
    // reported (one stat, not a second read of the file).
    struct stat now;
    if (::stat(path.c_str(), &now) != 0)
      return "Wrote " + path + " but could not stat it afterwards: "
             + std::error_code(errno, std::generic_category()).message();
    if (static_cast<uint64_t>(now.st_dev) != w->device
        || static_cast<uint64_t>(now.st_ino) != w->inode
        || static_cast<int64_t>(now.st_size) != w->size
        || w->size != static_cast<int64_t>(content.size()))
      return "Wrote " + path + " but the file there is no longer the one "
             "written (another process may have changed it concurrently). "
             "Re-read the file.";
  }
  report_file_change(ctx, path, before ? &*before : nullptr, content);
  return {};
}

class patch_tool final : public tool {
public:
  const char* name() const override { return "patch"; }
  const char* toolset() const override { return "file"; }

  script_policy script() const override {
    return {true, {}, "{'success', 'diff', ...}"};
  }

  std::string description() const override {
    return "Edit existing files; use this instead of sed/awk or rewriting "
           "whole files. mode='replace' (default): replace old_string with "
           "new_string in the file at path. old_string must identify one "
           "place (include a few surrounding lines) unless replace_all=true; "
           "small whitespace/indentation differences are tolerated, but copy "
           "old_string from read_file output without the 'N|' prefixes. "
           "mode='patch': apply a V4A patch touching several files: "
           "'*** Begin Patch', then sections '*** Update File: p' (hunks "
           "starting with '@@', lines prefixed ' ' context, '-' remove, "
           "'+' add), '*** Add File: p' ('+' lines), '*** Delete File: p', "
           "'*** Move File: old -> new', and finally '*** End Patch'. "
           "Returns a unified diff of the change.";
  }

  json::value schema() const override {
    json::value props;
    // Property order is the positional order of the script stub.
    props["path"] = schema_property("string", "replace mode: the file to edit.");
    props["old_string"] = schema_property("string",
                                   "replace mode: the exact text to find "
                                   "(unique unless replace_all).");
    props["new_string"] = schema_property("string",
                                   "replace mode: the text to put in its "
                                   "place (may be empty to delete).");
    props["replace_all"] = schema_property("boolean",
                                    "replace mode: replace every occurrence "
                                    "(default false).");
    props["mode"] = schema_property("string", "'replace' (default) or 'patch'.");
    props["patch"] = schema_property("string", "patch mode: the V4A patch text.");
    props["cross_profile"] = schema_property("boolean",
                                      "Allow editing another Mibyan "
                                      "profile's files (default false).");
    json::value s;
    s["type"] = "object";
    s["properties"] = std::move(props);
    return s;
  }

  json::value run(const json::value& args,
                  const tool_context& ctx) const override {
    auto mode = args.get_string("mode", "replace");
    if (mode == "replace")
      return run_replace(args, ctx);
    if (mode == "patch")
      return run_v4a(args, ctx);
    return failure("Unknown mode: " + mode
                   + ". Use mode='replace' or mode='patch'.");
  }

private:
  json::value run_replace(const json::value& args,
                          const tool_context& ctx) const;
  json::value run_v4a(const json::value& args,
                      const tool_context& ctx) const;

  mutable failure_counter failures_;
};

json::value patch_tool::run_replace(const json::value& args,
                                    const tool_context& ctx) const {
  auto raw = args.get_string("path");
  if (raw.empty())
    return failure("path required");
  auto old_v = args.find("old_string");
  auto new_v = args.find("new_string");
  if (old_v == nullptr || new_v == nullptr || !old_v->is_string()
      || !new_v->is_string())
    return failure("old_string and new_string required");
  auto& old_s = old_v->as_string();
  auto& new_s = new_v->as_string();
  if (old_s.empty())
    return failure("old_string cannot be empty");
  if (old_s == new_s)
    return failure("old_string and new_string are identical");
  if (auto usable = check_path_text(raw); !usable.ok())
    return failure(usable.error);
  auto path = resolve_path(raw, ctx.cwd);
  auto policy = modification_policy(path, args, ctx);
  if (policy.refusal)
    return failure(*policy.refusal);
  std::string err;
  auto before = load_for_edit(ctx, path, err);
  if (!before) {
    auto out = failure(err);
    if (err.rfind("File not found", 0) == 0) {
      out["similar_files"] = string_array(similar_files(path, 5));
      out["_hint"] = "patch edits existing files; use write_file to create "
                     "a new one.";
    }
    return out;
  }
  auto r = fuzzy_replace(*before, old_s, new_s,
                         args.get_bool("replace_all", false));
  auto fail_key = ctx.session_id + "\n" + path;
  if (!r.error.empty()) {
    if (!r.not_found)
      return failure(r.error);
    int n = failures_.fail(fail_key);
    auto out = failure("Could not find match for old_string in " + path);
    std::string hint = closest_section(*before, old_s);
    if (n >= 3)
      hint += (hint.empty() ? "" : "\n") + std::string{"This is failure #"}
              + std::to_string(n) + " to match old_string in this file. Stop "
              "retrying patch with guessed text: read the file again with "
              "read_file and copy old_string exactly, or rewrite the file "
              "with write_file.";
    else
      hint += (hint.empty() ? "" : "\n")
              + std::string{"Re-read the file with read_file and copy "
                            "old_string exactly (without the 'N|' line "
                            "prefixes)."};
    out["_hint"] = hint;
    return out;
  }
  failures_.reset(fail_key);
  auto diff = unified_diff(*before, r.content, diff_label("a", raw),
                           diff_label("b", raw));
  if (auto blocked = check_write_keyed(path, policy.approval_key, "patch",
                                       diff, ctx))
    return failure(*blocked);
  auto stale = stale_write_warning(ctx, path);
  // A checkpoint of the project first (docs/checkpoints.md).
  checkpoint_guard checkpoint;
  auto* checkpoints = checkpointer_for(ctx);
  if (checkpoints) {
    checkpoint = checkpoints->before_write(ctx, {path}, "patch");
    if (checkpoint.blocked)
      return failure(checkpoint.warning);
  }
  if (auto werr = write_verified(ctx, path, before, r.content);
      !werr.empty())
    return failure(werr);
  note_file_written(ctx, path);
  if (checkpoints)
    checkpoints->after_write(ctx, {path});
  json::value out;
  out["success"] = true;
  out["diff"] = std::move(diff);
  out["files_modified"] = string_array({path});
  out["resolved_path"] = path;
  out["replacements"] = static_cast<int64_t>(r.replacements);
  if (r.strategy != "exact")
    out["match_strategy"] = r.strategy;
  if (auto lint = lint_delta(path, before, r.content); !lint.is_null())
    out["lint"] = std::move(lint);
  if (!stale.empty())
    out["_warning"] = stale;
  add_checkpoint_warning(out, checkpoint);
  return out;
}

json::value patch_tool::run_v4a(const json::value& args,
                                const tool_context& ctx) const {
  auto text = args.get_string("patch");
  if (strings::trim_view(text).empty())
    return failure("patch content required");
  std::vector<v4a_section> sections;
  if (auto err = parse_v4a(text, sections); !err.empty())
    return failure("Invalid patch: " + err);

  // The planned state of every touched file: nullopt = deleted.
  struct planned {
    std::string label;
    std::optional<std::string> before;
    std::optional<std::string> after;
  };
  std::map<std::string, planned> plan;
  // The approval key of every path checked (write_policy_of).
  std::map<std::string, std::optional<std::string>> keys;
  std::vector<std::string> order; // first-touch order of paths
  auto current = [&](const std::string& path, std::string& err)
    -> std::optional<std::string> {
    if (auto i = plan.find(path); i != plan.end()) {
      if (!i->second.after)
        err = "File not found: " + path + " (deleted earlier in the patch)";
      return i->second.after;
    }
    return load_for_edit(ctx, path, err);
  };
  auto touch = [&](const std::string& path, const std::string& label,
                   std::optional<std::string> before) -> planned& {
    auto i = plan.find(path);
    if (i == plan.end()) {
      order.push_back(path);
      i = plan.emplace(path, planned{label, before, before}).first;
    }
    return i->second;
  };
  std::vector<std::string> created;
  std::vector<std::string> deleted;
  std::vector<std::string> modified;
  for (auto& s : sections) {
    if (auto usable = check_path_text(s.path); !usable.ok())
      return failure(s.path + ": " + usable.error);
    auto path = resolve_path(s.path, ctx.cwd);
    auto policy = modification_policy(path, args, ctx);
    if (policy.refusal)
      return failure(*policy.refusal);
    keys[path] = std::move(policy.approval_key);
    std::string err;
    struct stat st;
    bool on_disk = ::stat(path.c_str(), &st) == 0;
    auto known = plan.find(path);
    bool exists = known != plan.end() ? known->second.after.has_value()
                                      : on_disk;
    switch (s.what) {
      case v4a_section::kind::add: {
        if (exists)
          return failure("Add File: " + path
                         + " already exists; use '*** Update File:' to "
                           "change it.");
        touch(path, s.path, std::nullopt).after = s.content;
        created.push_back(path);
        break;
      }
      case v4a_section::kind::remove: {
        auto before = current(path, err);
        if (!before)
          return failure("Delete File: " + err);
        touch(path, s.path, before).after.reset();
        deleted.push_back(path);
        break;
      }
      case v4a_section::kind::update: {
        auto before = current(path, err);
        if (!before)
          return failure("Update File: " + err);
        std::string after;
        if (auto herr = apply_v4a_hunks(*before, s.hunks, after);
            !herr.empty())
          return failure("Update File: " + path + ": " + herr);
        if (s.move_to.empty()) {
          touch(path, s.path, before).after = after;
          modified.push_back(path);
          break;
        }
        if (auto usable = check_path_text(s.move_to); !usable.ok())
          return failure(s.move_to + ": " + usable.error);
        auto dest = resolve_path(s.move_to, ctx.cwd);
        auto dest_policy = modification_policy(dest, args, ctx);
        if (dest_policy.refusal)
          return failure(*dest_policy.refusal);
        keys[dest] = std::move(dest_policy.approval_key);
        struct stat dst;
        auto dknown = plan.find(dest);
        bool dexists = dknown != plan.end()
                         ? dknown->second.after.has_value()
                         : ::stat(dest.c_str(), &dst) == 0;
        if (dexists)
          return failure("Move destination already exists: " + dest);
        touch(path, s.path, before).after.reset();
        std::optional<std::string> none;
        touch(dest, s.move_to, none).after = after;
        deleted.push_back(path);
        created.push_back(dest);
        break;
      }
    }
  }

  // Everything applies in memory. Writes that need approval are asked
  // about (one file at a time) before anything is written.
  for (auto& path : order) {
    auto& p = plan[path];
    if (p.before == p.after)
      continue;
    auto d = unified_diff(p.before ? *p.before : std::string{},
                          p.after ? *p.after : std::string{},
                          p.before ? diff_label("a", p.label) : "/dev/null",
                          p.after ? diff_label("b", p.label) : "/dev/null");
    if (auto blocked = check_write_keyed(path, keys[path], "patch", d, ctx))
      return failure(*blocked);
  }
  // A checkpoint of every project touched first (docs/checkpoints.md).
  checkpoint_guard checkpoint;
  auto* checkpoints = checkpointer_for(ctx);
  if (checkpoints) {
    std::vector<std::string> touched;
    for (auto& path : order)
      if (plan[path].before != plan[path].after)
        touched.push_back(path);
    if (!touched.empty())
      checkpoint = checkpoints->before_write(ctx, touched, "patch");
    if (checkpoint.blocked)
      return failure(checkpoint.warning);
  }
  // Now write. The agent's files are recorded however far the writes get.
  std::vector<std::string> written;
  struct record_written {
    file_checkpointer* cp;
    const tool_context& ctx;
    const std::vector<std::string>& paths;
    ~record_written() {
      if (cp && !paths.empty())
        cp->after_write(ctx, paths);
    }
  } record{checkpoints, ctx, written};
  std::string diff;
  json::value lint;
  std::string stale;
  for (auto& path : order) {
    auto& p = plan[path];
    if (p.before == p.after)
      continue;
    if (auto w = stale_write_warning(ctx, path); !w.empty())
      stale += (stale.empty() ? "" : "\n") + w;
    if (p.after) {
      if (auto werr = write_verified(ctx, path, p.before, *p.after);
          !werr.empty()) {
        auto out = failure(werr);
        if (!written.empty())
          out["files_already_written"] = string_array(written);
        return out;
      }
      note_file_written(ctx, path);
      if (auto l = lint_delta(path, p.before, *p.after); !l.is_null())
        lint[path] = std::move(l);
    } else if (::unlink(path.c_str()) != 0) {
      auto out = failure("Cannot delete " + path + ": "
                         + std::error_code(errno, std::generic_category())
                             .message());
      if (!written.empty())
        out["files_already_written"] = string_array(written);
      return out;
    }
    written.push_back(path);
    diff += unified_diff(p.before ? *p.before : std::string{},
                         p.after ? *p.after : std::string{},
                         p.before ? diff_label("a", p.label) : "/dev/null",
                         p.after ? diff_label("b", p.label) : "/dev/null");
  }
  dedupe(modified);
  dedupe(created);
  dedupe(deleted);
  json::value out;
  out["success"] = true;
  out["diff"] = diff;
  out["files_modified"] = string_array(modified);
  out["files_created"] = string_array(created);
  out["files_deleted"] = string_array(deleted);
  if (!lint.is_null())
    out["lint"] = std::move(lint);
  if (!stale.empty())
    out["_warning"] = stale;
  add_checkpoint_warning(out, checkpoint);
  return out;
}

} // namespace

std::unique_ptr<tool> make_patch_tool() {
  return std::make_unique<patch_tool>();
}

} // namespace mibyan
