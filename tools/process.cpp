// The `process` tool: lists and drives background processes started by
// terminal(background=true). Behaviour and result shapes: docs/tools.md,
// "Background processes". The processes live in the runtime's
// process_registry; this file only validates, calls it and renders.
#include "tools/core_tools.hpp"

#include <algorithm>

#include "config/options.hpp"
#include "base/process_registry.hpp"
#include "tools/terminal_background.hpp"

namespace mibyan {

namespace {

constexpr size_t poll_preview_chars = 1000;
constexpr size_t wait_output_chars = 2000;
constexpr int64_t default_log_lines = 200;
constexpr int64_t wait_deadline_margin_seconds = 15;

const char* const actions[] = {"list", "poll", "log",    "wait",
                               "kill", "write", "submit", "close"};

std::string last_chars(const std::string& s, size_t n) {
  if (s.size() <= n)
    return s;
  size_t from = s.size() - n;
  // Do not start inside a UTF-8 sequence.
  while (from < s.size() && (static_cast<unsigned char>(s[from]) & 0xC0) == 0x80)
    ++from;
  return s.substr(from);
}

json::value not_found(const std::string& id) {
  json::value r;
  r["status"] = "not_found";
  r["error"] = "No process with ID " + id;
  return r;
}

const char* status_of(const process_snapshot& s) {
  return s.running ? "running" : "exited";
}

void add_exit(json::value& r, const process_snapshot& s) {
  if (s.running)
    return;
  r["exit_code"] = s.exit_code;
  r["completion_reason"] = s.completion_reason;
  r["termination_source"] = s.termination_source;
}

double round_seconds(double x) {
  return static_cast<double>(static_cast<int64_t>(x * 10)) / 10.0;
}

int64_t wait_limit(const json::value& args, const options& cfg) {
  auto cap = cfg.terminal.timeout;
  return std::clamp<int64_t>(args.get_int("timeout", cap), 1, cap);
}

class process_tool final : public tool {
public:
  const char* name() const override { return "process"; }
  const char* toolset() const override { return "terminal"; }

  std::string description() const override {
    return "Manage background processes started with "
           "terminal(background=true). Actions: list (this session's "
           "processes), poll (status + last output), log (output lines; "
           "offset/limit, default the last 200), wait (block until it exits "
           "or `timeout` seconds pass), kill (the whole process group), "
           "write (send `data` to stdin), submit (send `data` plus a "
           "newline, e.g. a line to a REPL started with pty=true), close "
           "(close stdin / send EOF). Every action but list needs "
           "session_id.";
  }

  json::value schema() const override {
    json::value props;
    props["action"] = schema_property("string", "What to do.");
    json::value names = json::value::make_array();
    for (auto a : actions)
      names.push_back(a);
    props["action"]["enum"] = std::move(names);
    props["session_id"] = schema_property("string",
                                          "The process id returned by "
                                          "terminal(background=true).");
    props["data"] = schema_property("string",
                                    "Text for write/submit.");
    props["timeout"] = schema_property("integer",
                                       "wait: seconds to wait at most "
                                       "(capped at the terminal default "
                                       "timeout).");
    props["timeout"]["minimum"] = 1;
    props["offset"] = schema_property("integer",
                                      "log: first line to show (0-based); "
                                      "omit for the last `limit` lines.");
    props["offset"]["minimum"] = 0;
    props["limit"] = schema_property("integer",
                                     "log: number of lines (default 200).");
    props["limit"]["minimum"] = 1;
    json::value s;
    s["type"] = "object";
    s["properties"] = std::move(props);
    s["required"] = json::array{json::value{"action"}};
    return s;
  }

  std::chrono::milliseconds deadline(const json::value& args,
                                     const options& cfg) const override {
    if (args.get_string("action") == "wait")
      return std::chrono::seconds(wait_limit(args, cfg)
                                  + wait_deadline_margin_seconds);
    return std::chrono::seconds(30);
  }

  json::value run(const json::value& args,
                  const tool_context& ctx) const override {
    if (ctx.from_script)
      return error_result("process is not available in execute_code "
                          "scripts; scripts run terminal commands in the "
                          "foreground only.");
    if (ctx.processes == nullptr)
      return error_result("background processes are not available in this "
                          "runtime.");
    auto& reg = *ctx.processes;
    auto action = args.get_string("action");
    if (action == "list")
      return list(reg, ctx);
    auto id = args.get_string("session_id");
    if (id.empty())
      return error_result("session_id is required for " + action);
    process_snapshot snap;
    if (!reg.get(ctx.session_id, id, snap))
      return not_found(id);
    if (action == "poll")
      return poll(snap);
    if (action == "log")
      return log(snap, args);
    if (action == "wait")
      return wait(reg, ctx, id, args);
    if (action == "kill") {
      if (!snap.running) {
        (void)reg.kill(ctx.session_id, id); // stragglers of the group
        json::value r;
        r["status"] = "already_exited";
        r["session_id"] = id;
        add_exit(r, snap);
        return r;
      }
      if (auto killed = reg.kill(ctx.session_id, id); !killed.ok())
        return error_result("kill failed: " + killed.error);
      reg.get(ctx.session_id, id, snap);
      json::value r;
      r["status"] = "killed";
      r["session_id"] = id;
      add_exit(r, snap);
      return r;
    }
    if (action == "write" || action == "submit") {
      auto d = args.find("data");
      if (d == nullptr || !d->is_string())
        return error_result("data is required for " + action);
      auto data = d->as_string();
      if (action == "submit")
        data += "\n";
      if (auto wrote = reg.write(ctx.session_id, id, data); !wrote.ok())
        return error_result("Cannot " + action + " to process " + id + ": "
                            + wrote.error);
      json::value r;
      r["status"] = "ok";
      r["session_id"] = id;
      r["bytes_written"] = static_cast<int64_t>(data.size());
      return r;
    }
    if (action == "close") {
      if (auto closed = reg.close_stdin(ctx.session_id, id); !closed.ok())
        return error_result("Cannot close stdin of process " + id + ": "
                            + closed.error);
      json::value r;
      r["status"] = "ok";
      r["session_id"] = id;
      r["note"] = snap.pty ? "EOF (Ctrl-D) sent to the terminal"
                           : "stdin closed";
      return r;
    }
    return error_result("Unknown action: " + action);
  }

private:
  static json::value list(process_registry& reg, const tool_context& ctx) {
    json::value items = json::value::make_array();
    for (auto& s : reg.list(ctx.session_id)) {
      json::value p;
      p["session_id"] = s.id;
      p["command"] = s.command;
      p["pid"] = s.pid;
      p["status"] = status_of(s);
      p["uptime_seconds"] = round_seconds(s.uptime_seconds);
      p["started_at"] = s.started_at;
      if (s.pty)
        p["pty"] = true;
      add_exit(p, s);
      items.push_back(std::move(p));
    }
    json::value r;
    r["processes"] = std::move(items);
    return r;
  }

  static json::value poll(const process_snapshot& s) {
    json::value r;
    r["session_id"] = s.id;
    r["command"] = s.command;
    r["status"] = status_of(s);
    r["pid"] = s.pid;
    r["uptime_seconds"] = round_seconds(s.uptime_seconds);
    r["output_preview"] = last_chars(render_process_output(s.output),
                                     poll_preview_chars);
    add_exit(r, s);
    return r;
  }

  static json::value log(const process_snapshot& s, const json::value& args) {
    auto text = render_process_output(s.output);
    std::vector<std::string_view> lines;
    std::string_view rest{text};
    while (!rest.empty()) {
      auto nl = rest.find('\n');
      if (nl == std::string_view::npos) {
        lines.push_back(rest);
        break;
      }
      lines.push_back(rest.substr(0, nl));
      rest.remove_prefix(nl + 1);
    }
    auto total = static_cast<int64_t>(lines.size());
    auto limit = std::max<int64_t>(args.get_int("limit", default_log_lines), 1);
    int64_t from;
    if (args.find("offset") != nullptr)
      from = std::clamp<int64_t>(args.get_int("offset", 0), 0, total);
    else
      from = std::max<int64_t>(total - limit, 0);
    auto to = std::min<int64_t>(from + limit, total);
    std::string out;
    for (auto i = from; i < to; ++i) {
      out.append(lines[static_cast<size_t>(i)]);
      out.push_back('\n');
    }
    json::value r;
    r["session_id"] = s.id;
    r["command"] = s.command;
    r["status"] = status_of(s);
    r["output"] = std::move(out);
    r["total_lines"] = total;
    r["showing"] = std::to_string(to - from) + " lines";
    if (to - from > 0 && (from > 0 || to < total))
      r["range"] = "lines " + std::to_string(from) + "-"
                   + std::to_string(to - 1) + " of " + std::to_string(total)
                   + " (0-based)";
    if (s.output_total > s.output.size())
      r["note"] = "Older output was dropped: the buffer keeps the last "
                  + std::to_string(s.output.size()) + " bytes of "
                  + std::to_string(s.output_total) + ".";
    add_exit(r, s);
    return r;
  }

  static json::value wait(process_registry& reg, const tool_context& ctx,
                          const std::string& id, const json::value& args) {
    auto limit = wait_limit(args, *ctx.cfg);
    auto asked = args.get_int("timeout", limit);
    auto w = reg.wait(ctx.session_id, id, std::chrono::seconds(limit),
                      ctx.cancelled);
    process_snapshot s;
    if (w == process_registry::wait_result::not_found
        || !reg.get(ctx.session_id, id, s))
      return not_found(id);
    json::value r;
    switch (w) {
      case process_registry::wait_result::exited:
        r["status"] = "exited";
        r["exit_code"] = s.exit_code;
        r["output"] = last_chars(render_process_output(s.output),
                                 wait_output_chars);
        r["completion_reason"] = s.completion_reason;
        r["termination_source"] = s.termination_source;
        break;
      case process_registry::wait_result::timeout: {
        r["status"] = "timeout";
        std::string note = "Process " + id + " is still running after "
                           + std::to_string(limit) + " s";
        if (asked > limit)
          note += " (the wait was capped at " + std::to_string(limit)
                  + " s, the terminal timeout)";
        note += "; poll, wait again or kill it.";
        r["timeout_note"] = note;
        r["output_preview"] = last_chars(render_process_output(s.output),
                                         poll_preview_chars);
        break;
      }
      default:
        r["status"] = "interrupted";
        r["note"] = "The wait was interrupted; process " + id
                    + " keeps running.";
        break;
    }
    return r;
  }
};

} // namespace

std::unique_ptr<tool> make_process_tool() {
  return std::make_unique<process_tool>();
}

} // namespace mibyan
