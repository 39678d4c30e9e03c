// `mibyan run`: one user turn of the agent loop from the command line.
#include "cli/commands.hpp"
#include "cli/interrupt_watcher.hpp"
#include "cli/terminal_output.hpp"

#include <atomic>
#include <chrono>
#include <csignal>
#include <ctime>
#include <iostream>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include <pthread.h>
#include <unistd.h>

#include "agent/turn_result.hpp"
#include "base/json.hpp"
#include "base/log.hpp"
#include "cluster/client.hpp"
#include "runtime/background.hpp"
#include "runtime/runtime.hpp"

namespace mibyan::cli {

namespace {

void usage() {
  std::cerr
    << "usage: mibyan run [--provider P] [--model M] [--base-url URL]\n"
       "                  [--api-key K] [--session ID] [--toolsets a,b]\n"
       "                  [--max-iterations N] [--json]\n"
       "                  [--save-trajectory] [--no-context-files]\n"
       "                  [--connect HOST:PORT[,HOST:PORT...]] [--checkpoints]\n"
       "                  PROMPT\n"
       "  Runs one turn of the agent and prints the final answer.\n"
       "  --session ID (or --resume ID) continues (or creates) that\n"
       "  session, replaying its stored system prompt; without it a new\n"
       "  session is created and its id printed on stderr.\n"
       "  --no-context-files: no AGENTS.md, SOUL.md etc. in a new prompt.\n"
       "  --checkpoints snapshots files before the agent changes them\n"
       "  (mibyan checkpoints; docs/checkpoints.md).\n";
}


} // namespace

int run_command(const std::vector<std::string>& args,
                const global_flags& flags) {
  turn_call call;
  call.source = "cli";
  bool as_json = false;
  bool no_context_files = false;
  bool checkpoints = false;
  std::string connect;
  std::vector<std::string> positional;
  for (size_t i = 0; i < args.size(); ++i) {
    const auto& a = args[i];
    auto value = [&](std::string& out) {
      if (i + 1 >= args.size())
        return false;
      out = args[++i];
      return true;
    };
    std::string text;
    if (a == "--json") {
      as_json = true;
    } else if (a == "--connect" && i + 1 < args.size()) {
      connect = args[++i];
    } else if (a == "--save-trajectory") {
      call.save_trajectory = true;
    } else if (a == "--no-context-files") {
      no_context_files = true;
    } else if (a == "--checkpoints") {
      checkpoints = true;
    } else if (a == "-h" || a == "--help") {
      usage();
      return 0;
    } else if (is_agent_flag(a)) {
      if (!value(text)) {
        std::cerr << "mibyan run: " << a << " needs a value\n";
        usage();
        return 2;
      }
      if (auto err = apply_agent_flag(a, text, call); !err.empty()) {
        std::cerr << "mibyan run: " << err << "\n";
        return 2;
      }
    } else if (a == "--") {
      positional.insert(positional.end(), args.begin() + i + 1, args.end());
      break;
    } else if (a.size() > 1 && a[0] == '-') {
      std::cerr << "mibyan run: unknown option " << a << "\n";
      usage();
      return 2;
    } else {
      positional.push_back(a);
    }
  }
  if (positional.size() != 1) {
    std::cerr << "mibyan run: expected exactly one PROMPT argument (quote "
                 "it), got "
              << positional.size() << "\n";
    usage();
    return 2;
  }
  call.prompt = positional[0];
  if (call.prompt.find_first_not_of(" \t\r\n") == std::string::npos) {
    std::cerr << "mibyan run: the prompt is empty\n";
    return 2;
  }
  options opts;
  if (!load_config_or_report(flags, opts))
    return 2;
  if (no_context_files)
    opts.agent.context_files = false;
  if (checkpoints)
    opts.checkpoints.enabled = true;
  bool live = !as_json && ::isatty(1) == 1;
  // On a terminal, log lines go to $MIBYAN_HOME/logs/run.log instead of
  // between the lines of the answer.
  if (live)
    route_logs_to_file(flags, opts, "run");
  // --connect: the turn runs on a cluster gateway (docs/cluster.md).
  std::unique_ptr<cluster_client> client;
  std::unique_ptr<runtime> rt;
  if (!connect.empty()) {
    auto connected = cluster_client::connect(connect, opts);
    if (!connected) {
      std::cerr << "mibyan run: " << connected.error << "\n";
      return cluster_client::refused(connected.get_status()) ? 2 : 1;
    }
    client = std::move(*connected);
  }
  block_interrupt_signals();
  if (!client) {
    auto made = create_runtime(std::move(opts));
    if (!made) {
      std::cerr << "mibyan: cannot start the runtime: " << made.error << "\n";
      return 1;
    }
    rt = std::move(*made);
    // Non-interactive: flagged commands follow single_query_mode.
    rt->set_approval_context(approval_context::single_query);
  }

  if (call.session_id.empty())
    call.session_id = new_session_id();
  std::string streamed;
  std::mutex out_mtx;
  std::unique_ptr<tool_activity> activity;
  // Warnings about the system prompt (context files skipped or flagged,
  // a stored prompt that is missing) go to stderr, terminal or not.
  call.on_delta = [](const std::string& kind, const std::string& text) {
    if (kind == "context")
      print_context_warnings(text, "mibyan run");
  };
  if (live) {
    activity = std::make_unique<tool_activity>(std::cout, out_mtx);
    call.on_tool = [&activity](const tool_event& ev) {
      activity->on_event(ev);
    };
    call.on_delta = [&streamed, &activity, &out_mtx](const std::string& kind,
                                                     const std::string& text) {
      std::lock_guard<std::mutex> guard{out_mtx};
      activity->clear_status_locked();
      if (kind == "context") {
        print_context_warnings(text, "mibyan run");
      } else if (kind == "text") {
        streamed += text;
        std::cout << text << std::flush;
      } else if (kind == "restart" && !streamed.empty()) {
        streamed.clear();
        std::cout << "\n" << std::flush;
      }
    };
  }
  turn_result out;
  {
    interrupt_watcher watcher{[&rt, &client, id = call.session_id] {
      MIBYAN_LOG(info, "cli", "interrupt requested (SIGINT)");
      if (client)
        client->interrupt(id, "the user pressed Ctrl-C");
      else
        rt->interrupt(id, "the user pressed Ctrl-C");
    }};
    out = client ? client->run_turn(call) : rt->run_turn(call);
  }
  if (activity)
    activity->end_turn();
  // Background subagents the turn started finish before the runtime goes
  // (their summaries reach the session's next turn, docs/agent_loop.md,
  // "Background deliveries"); Ctrl-C stops them.
  if (rt && out.started) {
    if (auto n = background_running(*rt, call.session_id); n > 0) {
      std::cerr << "mibyan run: waiting for " << n
                << " background subagent(s) to finish (Ctrl-C stops them)"
                << std::endl;
      std::atomic<bool> stop{false};
      interrupt_watcher watcher{[&stop] { stop = true; }};
      while (!stop
             && wait_background(*rt, call.session_id,
                                std::chrono::milliseconds{200})
                  > 0) {
      }
      if (stop) {
        std::cerr << "mibyan run: stopping the background subagents"
                  << std::endl;
        rt->close_session(call.session_id);
      }
    }
  }
  // One turn per run: the runtime (and the conversation it keeps in
  // memory) is not needed to print the result.
  rt.reset();
  client.reset();
  if (!out.started) {
    std::cerr << "mibyan run: " << out.error << "\n";
    return out.config_error ? 2 : 1;
  }
  if (!out.trajectory_error.empty())
    std::cerr << "mibyan run: trajectory not saved: " << out.trajectory_error
              << "\n";
  bool failed = out.failed;
  bool has_answer = out.final_response.has_value();
  const std::string& err_text = out.error;
  if (as_json) {
    // The JSON form is rendered here, at the edge (docs/embedding.md).
    std::cout << turn_result_json(out).pretty() << std::endl;
  } else if (has_answer) {
    const auto& answer = *out.final_response;
    if (!live || streamed.empty())
      std::cout << answer << std::endl;
    else if (streamed != answer)
      std::cout << "\n" << answer << std::endl;
    else
      std::cout << std::endl;
  } else if (live && !streamed.empty()) {
    std::cout << std::endl;
  }
  std::cerr << "session: " << out.session_id << "\n";
  if (failed || !has_answer) {
    if (!as_json)
      std::cerr << "mibyan run: "
                << (err_text.empty() ? std::string{"the turn produced no "
                                                   "answer"}
                                     : err_text)
                << "\n";
    return 1;
  }
  return 0;
}

} // namespace mibyan::cli
