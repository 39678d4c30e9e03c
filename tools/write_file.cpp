// The write_file tool: replace a whole file atomically.
//
// `content` is deliberately not in the schema's "required" list: when a
// model's tool-call arguments are cut off (output token limit) `content` is
// what goes missing, and the generic "missing argument" message does not
// tell the model why. run() answers with an explicit explanation instead.

#include <sys/stat.h>

#include "config/options.hpp"
#include "tools/approval_gate.hpp"
#include "tools/client_files.hpp"
#include "tools/core_tools.hpp"
#include "tools/file_checkpointer.hpp"
#include "tools/file_io.hpp"
#include "tools/lint_check.hpp"
#include "tools/path_policy.hpp"
#include "tools/read_tracker.hpp"

namespace mibyan {

namespace {

// The largest old text kept to report an edit (tools/client_files.hpp).
constexpr size_t max_reported_bytes = 4 << 20;

// Largest previous content read back for the lint delta.
constexpr size_t max_lint_bytes = 8 * 1024 * 1024;

class write_file_tool final : public tool {
public:
  const char* name() const override { return "write_file"; }
  const char* toolset() const override { return "file"; }

  script_policy script() const override {
    return {true, {}, "{'bytes_written', ...}"};
  }

  std::string description() const override {
    return "Create or overwrite a file with the given content (the whole "
           "file). Parent directories are created. The write is atomic: "
           "readers see the old or the new file, never a mix. Use this "
           "instead of echo/cat/heredocs in the terminal. For small edits "
           "to an existing file prefer `patch`, which changes only the "
           "part you name. Both `path` and `content` are required.";
  }

  json::value schema() const override {
    json::value props;
    props["path"] = path_property();
    props["content"] = schema_property("string", "The complete new content of the "
                                          "file (required).");
    props["cross_profile"] = schema_property("boolean",
                                      "Allow writing into another Mibyan "
                                      "profile's directory (default false).");
    json::value s;
    s["type"] = "object";
    s["properties"] = std::move(props);
    s["required"] = json::array{"path"};
    return s;
  }

  json::value run(const json::value& args,
                  const tool_context& ctx) const override {
    auto raw = args.get_string("path");
    if (auto usable = check_path_text(raw); !usable.ok())
      return error_result(usable.error);
    auto content = args.find("content");
    if (content == nullptr || !content->is_string())
      return error_result(
        "write_file needs 'content': the call arrived without it. This "
        "usually means the tool-call arguments were cut off because the "
        "content was too long for one response. Write the file in smaller "
        "pieces: write_file with the first part, then add the rest with "
        "patch (or several smaller files).");
    auto path = resolve_path(raw, ctx.cwd);
    auto home = mibyan_home_of(ctx);
    if (auto why = write_refusal(path, home))
      return error_result(*why);
    if (!args.get_bool("cross_profile", false))
      if (auto why = cross_profile_refusal(path, home))
        return error_result(*why);
    struct stat st;
    bool existed = ::stat(path.c_str(), &st) == 0;
    if (existed && S_ISDIR(st.st_mode))
      return error_result("Path is a directory: " + path
                          + ". Give the path of a file inside it.");
    std::optional<std::string> before;
    if (existed && S_ISREG(st.st_mode) && has_syntax_check(path)) {
      before = read_whole_file(path, max_lint_bytes).value;
    }
    auto& text = content->as_string();
    if (auto blocked = check_write(path, "write_file", text, ctx))
      return error_result(*blocked);
    auto stale = stale_write_warning(ctx, path);
    // A checkpoint of the project first (docs/checkpoints.md).
    checkpoint_guard checkpoint;
    auto* checkpoints = checkpointer_for(ctx);
    if (checkpoints) {
      checkpoint = checkpoints->before_write(ctx, {path}, "write_file");
      if (checkpoint.blocked)
        return error_result(checkpoint.warning);
    }
    // A session with client file access writes through the editor
    // (tools/client_files.hpp); a watched one keeps the old text for the
    // edit report.
    auto files = client_files_of(ctx);
    std::optional<std::string> old_text;
    if (files && files->changed && existed && S_ISREG(st.st_mode)) {
      if (files->read)
        if (auto got = files->read(path, ctx.cancelled))
          old_text = std::move(*got);
      if (!old_text)
        old_text = before ? before
                          : read_whole_file(path, max_reported_bytes).value;
    }
    write_outcome written;
    if (files && files->write) {
      if (auto st2 = files->write(path, text, ctx.cancelled); !st2)
        return error_result("Cannot write " + path + " through the editor: "
                            + st2.error);
      written.written_path = path;
    } else {
      auto w = atomic_write(path, text);
      if (!w.ok())
        return error_result(w.error);
      written = std::move(*w);
    }
    note_file_written(ctx, path);
    if (checkpoints)
      checkpoints->after_write(ctx, {path});
    report_file_change(ctx, path, old_text ? &*old_text : nullptr, text);
    json::value out;
    out["bytes_written"] = static_cast<int64_t>(text.size());
    out["dirs_created"] = written.dirs_created;
    out["resolved_path"] = path;
    json::value modified = json::value::make_array();
    modified.push_back(written.written_path);
    out["files_modified"] = std::move(modified);
    if (auto lint = lint_delta(path, existed ? before : std::nullopt, text);
        !lint.is_null())
      out["lint"] = std::move(lint);
    if (!stale.empty())
      out["_warning"] = stale;
    add_checkpoint_warning(out, checkpoint);
    return out;
  }
};

} // namespace

std::unique_ptr<tool> make_write_file_tool() {
  return std::make_unique<write_file_tool>();
}

} // namespace mibyan
