// The `terminal` tool: runs one shell command in the foreground and returns
// its merged stdout + stderr (docs/tools.md, "terminal").
//
// Mibyan specifics: background=true (optionally with pty=true) hands the
// command to tools/terminal_background.hpp; a foreground PTY is refused with
// a clear error; processes a foreground command leaves behind are killed when
// the call returns; secrets are filtered out of the child's environment
// (base/env_filter.hpp); output beyond tool_output.max_bytes is cut to
// head 40 % + tail 60 % and the full text (up to 5 MB) is spilled to a new
// file (O_EXCL) $MIBYAN_HOME/cache/exec/session-<session>/terminal-<call
// id>-<unique>.txt for read_file.
#include "tools/core_tools.hpp"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/options.hpp"
#include "base/env_filter.hpp"
#include "base/private_file.hpp"
#include "base/subprocess.hpp"
#include "kernels/process_launcher.hpp"
#include "base/output_cap.hpp"
#include "tools/agent/agent_tool_state.hpp"
#include "tools/redact_result.hpp"
#include "tools/terminal_background.hpp"
#include "tools/script_sandbox.hpp"
#include "tools/approval_gate.hpp"
#include "tools/file_checkpointer.hpp"

namespace mibyan {

namespace {

/// Bytes of raw output saved to the spill file of a truncated command.
constexpr size_t max_spill_bytes = 5'000'000;

/// Longest command accepted: Linux refuses a single exec argument longer
/// than MAX_ARG_STRLEN (32 pages).
constexpr size_t max_command_bytes = 131'072 - 1;

/// Seconds the runtime deadline adds on top of timeout + kill grace.
constexpr int64_t deadline_margin_seconds = 10;

bool is_blank(const std::string& s) {
  return s.find_first_not_of(" \t\r\n") == std::string::npos;
}

// Returns `raw` reduced to a safe file name component ("" if nothing is
// left).
std::string file_id(const std::string& raw) {
  std::string id;
  for (char c : raw) {
    if (id.size() >= 64)
      break;
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_')
      id.push_back(c);
  }
  return id;
}

std::string generated_id() {
  static std::atomic<uint64_t> counter{0};
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
              std::chrono::system_clock::now().time_since_epoch())
              .count();
  return std::to_string(ms) + "-" + std::to_string(::getpid()) + "-"
         + std::to_string(counter.fetch_add(1));
}

// Returns the program name of the last simple command of `command`, the one
// whose status the shell reports ("" when unclear).
std::string last_program(const std::string& command) {
  size_t cut = 0;
  for (size_t i = 0; i < command.size(); ++i) {
    char c = command[i];
    if (c == '|' || c == ';' || c == '&' || c == '\n')
      cut = i + 1;
  }
  std::string_view rest{command};
  rest.remove_prefix(cut);
  while (true) {
    auto b = rest.find_first_not_of(" \t\r");
    if (b == std::string_view::npos)
      return {};
    rest.remove_prefix(b);
    auto e = rest.find_first_of(" \t\r");
    auto word = rest.substr(0, e);
    bool assignment = word.find('=') != std::string_view::npos
                      && word.front() != '=';
    if (assignment || word == "sudo" || word == "time" || word == "!"
        || word == "exec" || word == "command" || word == "env") {
      if (e == std::string_view::npos)
        return {};
      rest.remove_prefix(e);
      continue;
    }
    auto slash = word.rfind('/');
    if (slash != std::string_view::npos)
      word.remove_prefix(slash + 1);
    return std::string{word};
  }
}

// Explains exit codes a model might misread as failures.
std::string exit_code_meaning(const std::string& command, int code,
                              int signal) {
  if (signal > 0) {
    const char* abbrev = ::sigabbrev_np(signal);
    const char* desc = ::strsignal(signal);
    return std::string{"Terminated by signal "}
           + (abbrev ? std::string{"SIG"} + abbrev : std::to_string(signal))
           + (desc ? std::string{" ("} + desc + ")" : std::string{});
  }
  if (code == 126)
    return "Command found but could not be executed (permission denied or "
           "not an executable)";
  if (code == 127)
    return "Command not found";
  if (code != 1)
    return {};
  auto prog = last_program(command);
  if (prog == "grep" || prog == "egrep" || prog == "fgrep" || prog == "rg"
      || prog == "zgrep" || prog == "ag" || prog == "ack")
    return "No matches found (not an error)";
  if (prog == "diff" || prog == "cmp" || prog == "colordiff")
    return "Files differ (not an error)";
  if (prog == "test" || prog == "[" || prog == "[[")
    return "Condition evaluated to false (not an error)";
  return {};
}

json::value result_object(std::string output, int exit_code,
                          json::value error) {
  json::value result;
  result["output"] = json::sanitize_utf8(output);
  result["exit_code"] = exit_code;
  result["error"] = std::move(error);
  return result;
}

class terminal_tool final : public tool {
public:
  const char* name() const override {
    return "terminal";
  }

  const char* toolset() const override {
    return "terminal";
  }

  // Scripts run commands in the foreground only.
  script_policy script() const override {
    return {true,
            {"background", "pty", "notify", "notify_on_complete",
             "watch_patterns", "heartbeat", "persist_on_release"},
            "{'output', 'exit_code', ...}"};
  }

  std::string description() const override {
    return "Run a shell command (bash -c) in the foreground and return its "
           "combined stdout and stderr plus the exit code. Use it for "
           "builds, tests, git, package managers, running programs. Do NOT "
           "use it to read, search or edit files: use read_file instead of "
           "cat/head/tail, search_files instead of grep/find/ls, and "
           "patch/write_file instead of sed/awk/echo redirection or "
           "heredocs. Commands run without a terminal (stdin is empty, no "
           "PTY) and must finish within `timeout` seconds (default 180, "
           "max 600). For servers, watchers and other long-running or "
           "interactive programs use background=true (pty=true for a REPL) "
           "and manage them with the process tool. Long output keeps its first 40% and last 60%; "
           "the full text is saved to a file named in `output_path`. "
           "Environment variables that look like secrets are not passed.";
  }

  json::value schema() const override {
    json::value props;
    props["command"] = schema_property("string",
                                       "The command to run with bash -c.");
    props["timeout"] = schema_property("integer",
                                       "Seconds before the command is "
                                       "killed (default 180, max 600).");
    props["timeout"]["minimum"] = 1;
    props["workdir"] = schema_property("string",
                                       "Directory to run in (default: the "
                                       "session's working directory). Must "
                                       "exist.");
    props["background"] = schema_property("boolean",
                                          "Start a long-running command "
                                          "(server, watcher, REPL) in the "
                                          "background and return at once "
                                          "with a process session_id for "
                                          "the process tool.");
    props["pty"] = schema_property("boolean", "With background=true: run "
                                              "under a pseudo-terminal, for "
                                              "interactive programs driven "
                                              "with process write/submit.");
    props["notify_on_complete"] = schema_property(
      "boolean", "With background=true: when the process ends, its exit "
                 "status and output tail are delivered to this "
                 "conversation at the start of the next turn.");
    props["watch_patterns"] = schema_property(
      "array", "With background=true: accepted and echoed.");
    props["watch_patterns"]["items"] = schema_property("string", "A pattern.");
    json::value s;
    s["type"] = "object";
    s["properties"] = std::move(props);
    s["required"] = json::array{json::value{"command"}};
    return s;
  }

  std::chrono::milliseconds deadline(const json::value& args,
                                     const options& cfg) const override {
    auto timeout = args.get_int("timeout", cfg.terminal.timeout);
    timeout = std::clamp<int64_t>(timeout, 1, cfg.terminal.max_timeout);
    // A flagged command may first wait up to approvals.timeout for a human.
    return std::chrono::seconds(timeout + cfg.terminal.kill_grace
                                + cfg.approvals.timeout
                                + deadline_margin_seconds);
  }

  json::value run(const json::value& args,
                  const tool_context& ctx) const override {
    const auto& cfg = *ctx.cfg;
    // -- validate ---------------------------------------------------------
    auto command = args.get_string("command");
    if (is_blank(command))
      return error_result("command must not be empty");
    if (command.find('\0') != std::string::npos)
      return error_result("command must not contain NUL bytes");
    if (command.size() > max_command_bytes)
      return error_result("command is too long (" +
                          std::to_string(command.size())
                          + " bytes; the limit is "
                          + std::to_string(max_command_bytes)
                          + "). Write the script to a file with write_file "
                            "and run that file instead.");
    if (auto blocked = check_command(command, ctx))
      return std::move(*blocked); // docs/approvals.md
    bool background = args.get_bool("background", false);
    if (!background && args.get_bool("pty", false))
      return error_result("pty=true needs background=true: foreground "
                          "commands run without a pseudo-terminal. Use "
                          "non-interactive flags (e.g. -y, --no-pager, "
                          "CI=1), or start the program with background=true "
                          "and pty=true and drive it with the process tool.");
    if (!background && (args.get_bool("notify_on_complete", false)
                        || args.find("watch_patterns") != nullptr))
      return error_result("notify_on_complete and watch_patterns apply to "
                          "background processes only (background=true).");
    auto max_timeout = cfg.terminal.max_timeout;
    auto timeout = args.get_int("timeout",
                                std::min(cfg.terminal.timeout, max_timeout));
    if (timeout < 1)
      return error_result("timeout must be >= 1 second");
    if (timeout > max_timeout && !background)
      return error_result(
        "timeout " + std::to_string(timeout) + " exceeds the foreground "
        "maximum of " + std::to_string(max_timeout) + " seconds. Run "
        "longer commands with background=true and follow them with the "
        "process tool (poll, wait, log).");
    std::string workdir = ctx.cwd;
    if (auto w = args.find("workdir"); w != nullptr) {
      workdir = w->as_string();
      if (is_blank(workdir))
        return error_result("workdir must not be empty (omit it to use the "
                            "session's working directory)");
      if (workdir.find('\0') != std::string::npos)
        return error_result("workdir must not contain NUL bytes");
      if (workdir == "~" || workdir.rfind("~/", 0) == 0) {
        const char* home = std::getenv("HOME");
        workdir = std::string{home ? home : ""} + workdir.substr(1);
      }
      if (workdir.front() != '/')
        workdir = ctx.cwd + "/" + workdir;
    }
    if (!workdir.empty()) {
      struct stat st;
      if (::stat(workdir.c_str(), &st) != 0)
        return error_result("workdir does not exist: " + workdir);
      if (!S_ISDIR(st.st_mode))
        return error_result("workdir is not a directory: " + workdir);
    }
    // A destructive command gets a checkpoint of its project first
    // (docs/checkpoints.md).
    checkpoint_guard checkpoint;
    if (auto* checkpoints = checkpointer_for(ctx)) {
      checkpoint = checkpoints->before_command(
        ctx, workdir.empty() ? ctx.cwd : workdir, command);
      if (checkpoint.blocked)
        return result_object("", -1, checkpoint.warning);
    }
    if (background) {
      auto started = start_background_command(args, ctx, command, workdir);
      add_checkpoint_warning(started, checkpoint);
      return started;
    }
    // -- run --------------------------------------------------------------
    subprocess_options opts;
    opts.shell_command = command;
    opts.cwd = workdir;
    // Script calls get their kernel's allow-list, direct calls lose
    // secret-named and credential-shaped variables (docs/security.md).
    // Plus the variables of the session's active skills (docs/tools.md).
    auto passthrough = passthrough_for(cfg.terminal.env_passthrough,
                                       ctx.agent, ctx.session_id);
    opts.env = ctx.from_script
                 ? allowlist_environment(current_environment(), passthrough)
                 : filter_environment(current_environment(), passthrough);
    opts.timeout = std::chrono::seconds(timeout);
    opts.kill_grace = std::chrono::seconds(cfg.terminal.kill_grace);
    opts.cancel = ctx.cancelled;
    opts.merge_stderr = true;
    // Foreground: nothing the command started outlives the call, not even
    // what left the process group (docs/security.md).
    opts.kill_leftovers = true;
    opts.max_output_bytes = static_cast<size_t>(cfg.tool_output.max_bytes);
    if (ctx.from_script) // the kernel's sandbox (tools/script_sandbox.hpp)
      if (auto wrapped = sandbox_script_command(opts, ctx); !wrapped.ok())
        return error_result(wrapped.error);
    std::string spill;
    bool spill_cut = false;
    opts.on_output = [&](output_stream, std::string_view data) {
      if (spill.size() < max_spill_bytes) {
        auto n = std::min(max_spill_bytes - spill.size(), data.size());
        spill.append(data.data(), n);
        spill_cut = spill_cut || n < data.size();
      } else {
        spill_cut = true;
      }
      return true;
    };
    auto res = launcher_or_real(ctx.launcher).run(opts);
    if (!res.spawn_error.empty())
      return result_object("", -1, "Failed to start command: "
                                     + res.spawn_error);
    // -- render -----------------------------------------------------------
    auto output = strip_ansi(render_head_tail(res.out_head, res.out_tail,
                                              res.out_omitted,
                                              res.out_total));
    int exit_code = res.exit_code;
    json::value error;
    if (res.timed_out) {
      exit_code = 124;
      error = "Command timed out after " + std::to_string(timeout)
              + " seconds";
    } else if (res.cancelled) {
      exit_code = 130;
      if (!output.empty() && output.back() != '\n')
        output += "\n";
      output += "[Command interrupted]";
    }
    auto result = result_object(std::move(output), exit_code,
                                std::move(error));
    if (!res.timed_out && !res.cancelled && exit_code != 0) {
      auto meaning = exit_code_meaning(command, exit_code, res.term_signal);
      if (!meaning.empty())
        result["exit_code_meaning"] = meaning;
    }
    add_checkpoint_warning(result, checkpoint);
    if (res.out_omitted > 0) {
      result["truncated"] = true;
      save_spill(result, ctx, redact_text(ctx, strip_ansi(spill)), spill_cut,
                 res.out_total);
    }
    return result;
  }

private:
  static void save_spill(json::value& result, const tool_context& ctx,
                         const std::string& text, bool cut,
                         uint64_t total) {
    if (ctx.home.empty()) {
      result["output_note"] = "Output was truncated; no MIBYAN_HOME is set, "
                              "so the full output was not saved.";
      return;
    }
    // One directory per session and a name no other call can take: two
    // sessions whose providers both say "call_0_0" never share a file.
    auto session = file_id(ctx.session_id);
    auto dir = ctx.home + "/cache/exec/"
               + (session.empty() ? std::string{"no-session"}
                                  : "session-" + session);
    auto id = file_id(ctx.call_id);
    if (id.empty())
      id = "call";
    auto saved = make_private_dirs(dir);
    std::string path;
    for (int attempt = 0; saved.ok() && attempt < 8; ++attempt) {
      path = dir + "/terminal-" + id + "-" + generated_id() + ".txt";
      saved = write_private_file(path, text, true); // O_EXCL
      if (saved.ok() || ::access(path.c_str(), F_OK) != 0)
        break; // written, or failed for another reason than the name
      saved = status::failure(status_code::already_exists, "the file exists");
    }
    if (!saved.ok()) {
      result["output_note"] = "Output was truncated and the full output "
                              "could not be saved: " + saved.error;
      return;
    }
    result["output_path"] = path;
    std::string note = "Output was truncated (" + std::to_string(total)
                       + " bytes in total). ";
    if (cut)
      note += "The first " + std::to_string(max_spill_bytes)
              + " bytes (the spill limit) were saved to " + path;
    else
      note += "The full output was saved to " + path;
    note += "; page through it with read_file (offset/limit) or search it "
            "with search_files.";
    result["output_note"] = note;
  }
};

} // namespace

std::unique_ptr<tool> make_terminal_tool() {
  return std::make_unique<terminal_tool>();
}

} // namespace mibyan
