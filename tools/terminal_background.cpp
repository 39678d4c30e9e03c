#include "tools/terminal_background.hpp"

#include "config/options.hpp"
#include "base/env_filter.hpp"
#include "base/process_registry.hpp"
#include "base/output_cap.hpp"
#include "tools/agent/agent_tool_state.hpp"

namespace mibyan {

json::value start_background_command(const json::value& args,
                                     const tool_context& ctx,
                                     const std::string& command,
                                     const std::string& workdir) {
  if (ctx.from_script)
    return error_result("background=true is not available from execute_code "
                        "scripts: scripts run terminal commands in the "
                        "foreground only. Start background processes with a "
                        "direct terminal call.");
  if (ctx.processes == nullptr)
    return error_result("background processes are not available in this "
                        "runtime; run the command in the foreground.");
  process_spec spec;
  spec.session_id = ctx.session_id;
  spec.command = command;
  spec.cwd = workdir;
  spec.env = filter_environment(
    current_environment(),
    passthrough_for(ctx.cfg->terminal.env_passthrough, ctx.agent,
                    ctx.session_id));
  spec.pty = args.get_bool("pty", false);
  bool notify = args.get_bool("notify_on_complete", false);
  // notify_on_complete: the exit status and output tail reach the
  // session's conversation at the start of its next turn (docs/tools.md,
  // "Background processes").
  bool pushed = notify && ctx.agent != nullptr
                && static_cast<bool>(ctx.agent->on_process_exit);
  if (pushed) {
    auto deliver = ctx.agent->on_process_exit;
    spec.on_exit = [deliver](const process_snapshot& s) {
      process_exit_notice n;
      n.session_id = s.session_id;
      n.process_id = s.id;
      n.command = s.command;
      n.status = s.completion_reason;
      n.exit_code = s.exit_code;
      n.output_tail = render_process_output(s.output);
      deliver(std::move(n));
    };
  }
  auto started = ctx.processes->start(spec);
  if (!started.ok()) {
    json::value r;
    r["output"] = "";
    r["exit_code"] = -1;
    r["error"] = started.error;
    return r;
  }
  json::value r;
  r["output"] = "Background process started";
  r["session_id"] = started->id;
  r["pid"] = started->pid;
  r["exit_code"] = 0;
  r["error"] = nullptr;
  if (spec.pty)
    r["pty"] = true;
  auto watch = args.find("watch_patterns");
  if (notify)
    r["notify_on_complete"] = true;
  if (watch != nullptr)
    r["watch_patterns"] = *watch;
  if (pushed && watch == nullptr)
    r["note"] = "When the process ends, its exit status and the tail of "
                "its output are delivered to this conversation at the start "
                "of the next turn; no need to poll.";
  else if (pushed)
    r["note"] = "When the process ends, its exit status and the tail of "
                "its output are delivered at the start of the next turn. "
                "Pattern notifications are not pushed: check the output "
                "with process(action=\"log\", session_id=\""
                + started->id + "\").";
  else if (notify || watch != nullptr)
    r["note"] = "Completion and pattern notifications are not pushed in "
                "this runtime: check the process with "
                "process(action=\"poll\"|\"wait\"|\"log\", session_id=\""
                + started->id + "\").";
  return r;
}

std::string render_process_output(std::string_view raw) {
  auto text = strip_ansi(raw);
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n')
      continue;
    out.push_back(text[i]);
  }
  return json::sanitize_utf8(out);
}

} // namespace mibyan
