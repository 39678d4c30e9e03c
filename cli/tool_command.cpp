#include "cli/commands.hpp"
#include "cli/interrupt_watcher.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <functional>
#include <csignal>
#include <iostream>
#include <mutex>
#include <thread>

#include <pthread.h>
#include <unistd.h>

#include "base/bounded_line_reader.hpp"
#include "base/json.hpp"
#include "base/log.hpp"
#include "cluster/client.hpp"
#include "runtime/runtime.hpp"
#include "cli/tool_lines.hpp"
#include "tools/argument_limit.hpp"
#include "tools/registry.hpp"
#include "tools/toolsets.hpp"

namespace mibyan::cli {

namespace {

void usage() {
  std::cerr << "usage:\n"
               "  mibyan tool NAME 'ARGS_JSON' [--session ID] [--cwd DIR]\n"
               "  mibyan tool --stdin [--session ID] [--cwd DIR]\n"
               "      one {\"tool\": NAME, \"args\": {...}} per line in, one "
               "result per line out\n"
               "  mibyan tool --list [--toolsets a,b]\n"
               "      the tools the model is offered (agent.toolsets and the "
               "disabled lists apply)\n"
               "  --connect HOST:PORT[,HOST:PORT...] runs the calls on a "
               "cluster; the next address takes over when a member is lost "
               "(docs/cluster.md)\n";
}

std::string generate_session_id() {
  return "cli-" + std::to_string(::getpid()) + "-"
         + std::to_string(std::chrono::system_clock::now()
                            .time_since_epoch().count() % 1000000000);
}

int list_tools(runtime& rt, const std::vector<std::string>& toolsets) {
  auto names = offered_tool_names(&toolsets_of(rt), tools_of(rt),
                                  config_of(rt), toolsets);
  if (!names) {
    std::cerr << "mibyan tool: " << names.error << "\n";
    return 2;
  }
  json::value out = json::value::make_array();
  for (auto& n : *names) {
    auto t = tools_of(rt).find(n);
    json::value entry;
    entry["name"] = t->name();
    entry["toolset"] = t->toolset();
    entry["description"] = t->description();
    entry["parameters"] = t->schema();
    out.push_back(std::move(entry));
  }
  std::cout << out.pretty() << "\n";
  return 0;
}

// The result lines of `mibyan tool --stdin` when the main thread reads the
// input (a terminal, a file, or a cluster client), one call in flight at a
// time. A call's completion (on a runtime thread) writes its line to
// stdout itself when that cannot block, so the result reaches the client
// without waiting for the main thread to wake up; otherwise it hands the
// line to the main thread, which writes it. The main thread waits for the
// call in flight before it writes or starts anything else, so lines stay
// in order. (From a pipe or socket the runtime's I/O thread reads the
// input instead: cli/tool_lines.hpp.)
class stdin_results {
public:
  /// Called on the main thread before each line is answered.
  void wait_idle() {
    std::string line;
    {
      std::unique_lock<std::mutex> guard{mtx_};
      cv_.wait(guard, [this] { return !busy_; });
      line.swap(handed_over_);
    }
    if (!line.empty())
      write_all_to(STDOUT_FILENO, line);
  }

  /// Main thread: writes a line while no call is in flight.
  void write(const std::string& result) {
    wait_idle();
    write_all_to(STDOUT_FILENO, result + "\n");
  }

  /// Main thread: a call is about to start.
  void start() {
    std::lock_guard<std::mutex> guard{mtx_};
    busy_ = true;
  }

  /// Any thread: the call in flight answered `result`.
  void finish(const std::string& result) {
    auto line = result + "\n";
    bool written = write_line_if_ready(STDOUT_FILENO, line);
    std::lock_guard<std::mutex> guard{mtx_};
    if (!written)
      handed_over_ = std::move(line);
    busy_ = false;
    cv_.notify_one();
  }

private:
  std::mutex mtx_;
  std::condition_variable cv_;
  bool busy_ = false;
  std::string handed_over_;
};

/// Starts one tool call; `done` is called once with its result JSON, on
/// any thread (possibly before this returns).
using tool_starter = std::function<void(
  const tool_call_request&, std::function<void(const std::string&)> done)>;

// One result line per input line, always (docs/configuration.md, `mibyan
// tool --stdin`): an empty or over-long line gets an error result, so the
// Nth output line answers the Nth input line.
int run_stdin(const tool_starter& start_call, const tool_line_settings& s) {
  std::string line;
  uint64_t seq = 0, length = 0;
  bounded_line_reader reader{STDIN_FILENO, max_tool_line_bytes(s)};
  stdin_results out;
  for (;;) {
    auto got = reader.next(line, length);
    if (got == bounded_line_reader::status::eof)
      break;
    ++seq;
    if (got == bounded_line_reader::status::too_long) {
      out.write(too_long_tool_line(seq, length, s));
      continue;
    }
    auto parsed = parse_tool_line(line, seq, s);
    if (!parsed.call) {
      out.write(parsed.answer);
      continue;
    }
    out.wait_idle();
    out.start();
    start_call(*parsed.call, [&out](const std::string& r) { out.finish(r); });
  }
  out.wait_idle();
  return 0;
}

// `mibyan tool --connect`: the same calls, output and exit codes, run on
// a cluster (docs/cluster.md).
int tool_on_cluster(const std::string& address, std::string session,
                    const std::string& cwd, bool from_stdin,
                    const std::vector<std::string>& positional,
                    const options& opts) {
  auto connected = cluster_client::connect(address, opts);
  if (!connected) {
    std::cerr << "mibyan tool: " << connected.error << "\n";
    return cluster_client::refused(connected.get_status()) ? 2 : 1;
  }
  auto client = std::move(*connected);
  if (session.empty())
    session = generate_session_id();
  block_interrupt_signals();
  interrupt_watcher watcher{[&client, session] {
    client->interrupt(session, "user sent a new message");
  }};
  if (from_stdin)
    return run_stdin([&client](const tool_call_request& c,
                               std::function<void(const std::string&)> done) {
      done(client->call_tool(c).result_json);
    }, tool_line_settings{session, cwd, opts.tools.max_argument_bytes});
  const auto& name = positional[0];
  auto names = client->tool_names();
  if (!names) {
    std::cerr << "mibyan tool: " << names.error << "\n";
    return 1;
  }
  if (std::find(names->begin(), names->end(), name) == names->end()) {
    std::string list;
    for (auto& n : *names)
      list += (list.empty() ? "" : ", ") + n;
    std::cerr << "mibyan tool: unknown tool '" << name
              << "'. Available tools: " << list << "\n";
    return 2;
  }
  auto args_json = positional.size() == 2 ? positional[1] : "{}";
  auto outcome = client->call_tool(tool_call_request{session, "cli-1", name,
                                                     args_json, cwd});
  std::cout << outcome.result_json << std::endl;
  return 0;
}

} // namespace

int tool_command(const std::vector<std::string>& args,
                 const global_flags& flags) {
  bool list = false, from_stdin = false;
  std::string session, cwd, connect;
  std::vector<std::string> toolsets;
  std::vector<std::string> positional;
  for (size_t i = 0; i < args.size(); ++i) {
    const auto& a = args[i];
    if (a == "--list") {
      list = true;
    } else if (a == "--stdin") {
      from_stdin = true;
    } else if ((a == "--session" || a == "--cwd") && i + 1 < args.size()) {
      (a == "--session" ? session : cwd) = args[++i];
    } else if (a == "--toolsets" && i + 1 < args.size()) {
      toolsets = split_list(args[++i]);
    } else if (a == "--connect" && i + 1 < args.size()) {
      connect = args[++i];
    } else if (a == "-h" || a == "--help") {
      usage();
      return 0;
    } else if (a.size() > 2 && a.rfind("--", 0) == 0) {
      std::cerr << "mibyan tool: unknown option " << a << "\n";
      usage();
      return 2;
    } else {
      positional.push_back(a);
    }
  }
  if (!list && !from_stdin && (positional.empty() || positional.size() > 2)) {
    usage();
    return 2;
  }
  std::string args_json = positional.size() == 2 ? positional[1] : "{}";
  if (!list && !from_stdin) {
    auto parsed = json::parse(args_json);
    if (!parsed) {
      std::cerr << "mibyan tool: ARGS_JSON is not valid JSON: "
                << parsed.error << "\n";
      return 2;
    }
    if (!parsed.v->is_object()) {
      std::cerr << "mibyan tool: ARGS_JSON must be a JSON object, got "
                << json::kind_name(parsed.v->type()) << "\n";
      return 2;
    }
  }
  options opts;
  if (!load_config_or_report(flags, opts))
    return 2;
  // A one-shot call outlives no kernel start-up: no pre-started kernel
  // (docs/execute_code.md, "Interpreter resolution").
  if (!from_stdin)
    opts.code_execution.prestart_kernels = 0;
  auto max_argument_bytes = opts.tools.max_argument_bytes;
  if (!list && !from_stdin) {
    if (auto size = check_argument_size(args_json.size(), max_argument_bytes);
        !size) {
      std::cerr << "mibyan tool: " << size.error << "\n";
      return 2;
    }
  }
  if (!connect.empty() && !list)
    return tool_on_cluster(connect, session, cwd, from_stdin, positional,
                           opts);
  block_interrupt_signals();
  std::string error;
  auto made = create_runtime(std::move(opts));
  if (!made) {
    std::cerr << "mibyan: cannot start the runtime: " << made.error << "\n";
    return 1;
  }
  std::unique_ptr<runtime> rt = std::move(*made);
  // Non-interactive: flagged commands follow single_query_mode.
  rt->set_approval_context(approval_context::single_query);

  if (list)
    return list_tools(*rt, toolsets);
  if (session.empty())
    session = generate_session_id();
  interrupt_watcher watcher{[&rt, session] {
    MIBYAN_LOG(info, "cli", "interrupt requested (SIGINT)");
    rt->interrupt(session, "user sent a new message");
  }};
  if (from_stdin) {
    tool_line_settings lines{session, cwd, max_argument_bytes};
    if (auto status = serve_tool_lines_on_io_loop(*rt, STDIN_FILENO,
                                                  STDOUT_FILENO, lines))
      return *status;
    return run_stdin([&rt](const tool_call_request& c,
                           std::function<void(const std::string&)> done) {
      rt->call_tool_async(c, [done](tool_outcome o) { done(o.result_json); });
    }, lines);
  }
  const auto& name = positional[0];
  if (tools_of(*rt).find(name) == nullptr) {
    std::cerr << "mibyan tool: unknown tool '" << name
              << "'. Available tools: " << tools_of(*rt).names() << "\n";
    return 2;
  }
  auto outcome = rt->call_tool(tool_call_request{session, "cli-1", name, args_json,
                                         cwd});
  std::cout << outcome.result_json << std::endl;
  return 0;
}

} // namespace mibyan::cli
