// `mibyan chat`: an interactive conversation, one agent turn per input line.
#include "cli/commands.hpp"
#include "base/strings.hpp"
#include "cli/approval_prompt.hpp"
#include "cli/clarify_prompt.hpp"
#include "cli/interrupt_watcher.hpp"
#include "cli/rollback.hpp"
#include "cli/terminal_output.hpp"

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "providers/provider_profile.hpp"
#include "base/json.hpp"
#include "base/log.hpp"
#include "runtime/background.hpp"
#include "runtime/runtime.hpp"

namespace mibyan::cli {

namespace {

void usage() {
  std::cerr
    << "usage: mibyan chat [--provider P] [--model M] [--base-url URL]\n"
       "                   [--api-key K] [--session ID] [--toolsets a,b]\n"
       "                   [--max-iterations N] [--save-trajectory]\n"
       "                   [--no-context-files]\n"
       "                   [--checkpoints]\n"
       "  Reads one message per line from stdin and answers each with an\n"
       "  agent turn, streaming the answer. Ctrl-C interrupts the running\n"
       "  turn; /help lists the chat commands. The context files loaded\n"
       "  into a new session's system prompt are listed on stderr.\n";
}

void chat_help() {
  std::cout << "commands:\n"
               "  /new    start a new session and print its id\n"
               "  /yolo   toggle approving every non-hardline command in "
               "this session\n"
               "  /rollback [N]  put back the files the agent changed in the\n"
               "          last turn (or since checkpoint N of this project),\n"
               "          keeping your own edits; the turn is marked undone\n"
               "          (needs checkpoints: --checkpoints)\n"
               "  /exit   leave (so does end of input)\n"
               "  /help   show this list\n"
               "Ctrl-C interrupts the running turn.\n"
            << std::flush;
}

// What the SIGINT watcher needs to know about the main loop. Guarded by
// `mtx`, which also serialises writes to stdout.
struct chat_state {
  std::mutex mtx;
  bool busy = false;
  /// Background announcements held while a turn prints (shown after it).
  std::vector<std::string> deferred;
  /// Ctrl-C was already forwarded to the running turn.
  bool interrupted = false;
  std::string session_id;
};

// Announces finished background work (docs/agent_loop.md, "Background
// deliveries") while the prompt waits: the runtime's listener only queues
// a line; this thread prints it under the output mutex, or defers it to
// the end of a running turn.
class announcer {
public:
  announcer(chat_state& st, bool interactive, const char* prompt)
    : st_(st), interactive_(interactive), prompt_(prompt),
      thread_([this] { loop(); }) {}
  ~announcer() {
    {
      std::lock_guard<std::mutex> g{mtx_};
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  // From a runtime thread: queues and returns.
  void post(const background_notice& n) {
    std::string line = "[background] "
                       + std::string{n.kind == "delegate" ? "task " : n.kind + " "}
                       + n.id + " " + n.headline;
    {
      std::lock_guard<std::mutex> g{mtx_};
      lines_.push_back(std::move(line));
    }
    cv_.notify_all();
  }
  // Prints the deferred lines; the caller holds st.mtx and no turn runs.
  static void flush_locked(chat_state& st) {
    for (auto& l : st.deferred)
      std::cout << l << "\n";
    st.deferred.clear();
    std::cout << std::flush;
  }

private:
  void loop() {
    std::unique_lock<std::mutex> g{mtx_};
    for (;;) {
      cv_.wait(g, [this] { return stop_ || !lines_.empty(); });
      if (lines_.empty() && stop_)
        return;
      auto lines = std::move(lines_);
      lines_.clear();
      g.unlock();
      {
        std::lock_guard<std::mutex> out{st_.mtx};
        if (st_.busy) {
          st_.deferred.insert(st_.deferred.end(), lines.begin(), lines.end());
        } else {
          for (auto& l : lines)
            std::cout << (interactive_ ? "\r" : "") << l << "\n";
          if (interactive_)
            std::cout << prompt_;
          std::cout << std::flush;
        }
      }
      g.lock();
    }
  }

  chat_state& st_;
  const bool interactive_;
  const char* prompt_;
  std::mutex mtx_;
  std::condition_variable cv_;
  std::vector<std::string> lines_;
  bool stop_ = false;
  std::thread thread_;
};

// Parses the options into `call`. Returns -1 to continue, else the exit
// code.
int parse_chat_args(const std::vector<std::string>& args, turn_call& call,
                    bool& no_context_files, bool& checkpoints) {
  for (size_t i = 0; i < args.size(); ++i) {
    const auto& a = args[i];
    if (a == "-h" || a == "--help") {
      usage();
      return 0;
    }
    if (a == "--no-context-files") {
      no_context_files = true;
      continue;
    }
    if (a == "--save-trajectory") {
      call.save_trajectory = true;
      continue;
    }
    if (a == "--checkpoints") {
      checkpoints = true;
      continue;
    }
    if (!is_agent_flag(a)) {
      std::cerr << "mibyan chat: "
                << (a.size() > 1 && a[0] == '-' ? "unknown option "
                                                : "unexpected argument ")
                << a << "\n";
      usage();
      return 2;
    }
    if (i + 1 >= args.size()) {
      std::cerr << "mibyan chat: " << a << " needs a value\n";
      usage();
      return 2;
    }
    if (auto err = apply_agent_flag(a, args[++i], call); !err.empty()) {
      std::cerr << "mibyan chat: " << err << "\n";
      return 2;
    }
  }
  return -1;
}

} // namespace

int chat_command(const std::vector<std::string>& args,
                 const global_flags& flags) {
  turn_call call;
  call.source = "cli";
  bool no_context_files = false;
  bool checkpoints = false;
  if (int rc = parse_chat_args(args, call, no_context_files, checkpoints);
      rc >= 0)
    return rc;
  options opts;
  if (!load_config_or_report(flags, opts))
    return 2;
  if (no_context_files)
    opts.agent.context_files = false;
  if (checkpoints)
    opts.checkpoints.enabled = true;
  {
    // Fail before reading input, as `mibyan run` does.
    options probe = opts;
    if (!call.provider.provider.empty())
      probe.model.provider = call.provider.provider;
    if (!call.provider.model.empty())
      probe.model.default_model = call.provider.model;
    if (!call.provider.base_url.empty())
      probe.model.base_url = call.provider.base_url;
    auto ep = resolve_main_endpoint(probe, call.provider.api_key);
    if (!ep.ok()) {
      std::cerr << "mibyan chat: " << ep.error << "\n";
      return 2;
    }
  }
  const bool decorate = ::isatty(1) == 1;
  // On a terminal, log lines go to $MIBYAN_HOME/logs/chat.log, not
  // between the lines of the conversation.
  if (::isatty(0) == 1 || decorate)
    route_logs_to_file(flags, opts, "chat");
  block_interrupt_signals();
  // Declared before the runtime, so it outlives the runtime's threads (an
  // approval prompt still unwinding uses its mutex).
  chat_state st;
  // Tool activity on the terminal (none when stdout is not one).
  std::unique_ptr<tool_activity> activity;
  if (decorate)
    activity = std::make_unique<tool_activity>(std::cout, st.mtx);
  std::string error;
  const options saved_opts = opts; // for /rollback
  auto made = create_runtime(std::move(opts));
  if (!made) {
    std::cerr << "mibyan: cannot start the runtime: " << made.error << "\n";
    return 1;
  }
  std::unique_ptr<runtime> rt = std::move(*made);
  const bool interactive = ::isatty(0) == 1;
  const char* prompt = "> ";
  // Approvals: a terminal is the approval channel (docs/approvals.md).
  if (interactive)
    rt->set_approval_callback([&st, &activity](const approval_prompt& p) {
      {
        // A background subagent asking while no turn runs: the prompt's
        // line reader owns the terminal, so nobody can answer here.
        std::lock_guard<std::mutex> guard{st.mtx};
        if (!st.busy) {
          std::cout << "\r[background] a subagent's command needs approval "
                       "while no turn runs; denied: "
                    << p.command.substr(0, 120) << "\n> " << std::flush;
          return approval_choice::deny;
        }
      }
      if (activity)
        activity->set_paused(true);
      auto choice = ask_on_terminal(p, st.mtx);
      if (activity)
        activity->set_paused(false);
      return choice;
    });
  else
    rt->set_approval_context(approval_context::single_query);
  // Clarify: the terminal answers the model's questions (docs/tools.md).
  if (interactive)
    rt->set_clarify_callback([&st](const clarify_prompt& p) {
      return ask_clarify_on_terminal(p, st.mtx);
    });
  // Declared after the runtime: it stops (and stops printing) first.
  auto notices = std::make_shared<announcer>(st, interactive, prompt);
  auto watch = watch_background(
    *rt, [weak = std::weak_ptr<announcer>(notices)](
           const background_notice& n) {
      if (auto a = weak.lock())
        a->post(n);
    });
  st.session_id = call.session_id.empty() ? new_session_id()
                                          : call.session_id;
  std::cerr << "session: " << st.session_id << "\n";
  interrupt_watcher watcher{[&] {
    std::lock_guard<std::mutex> guard{st.mtx};
    if (st.busy) {
      if (!st.interrupted) {
        MIBYAN_LOG(info, "cli", "interrupt requested (SIGINT)");
        st.interrupted = true;
        rt->interrupt(st.session_id, "the user pressed Ctrl-C");
      }
    } else if (interactive) {
      std::cout << "\n" << prompt << std::flush;
    }
  }};
  bool first_turn = true;
  std::set<std::string> yolo_sessions;
  std::string line;
  for (;;) {
    {
      std::lock_guard<std::mutex> guard{st.mtx};
      announcer::flush_locked(st);
      if (interactive)
        std::cout << prompt << std::flush;
    }
    if (!std::getline(std::cin, line))
      break;
    auto text = strings::trim(line);
    if (text.empty())
      continue;
    if (text == "/exit" || text == "/quit")
      break;
    if (text == "/help") {
      std::lock_guard<std::mutex> guard{st.mtx};
      chat_help();
      continue;
    }
    if (text == "/new") {
      std::string old;
      {
        std::lock_guard<std::mutex> guard{st.mtx};
        old = st.session_id;
        st.session_id = new_session_id();
        std::cerr << "session: " << st.session_id << "\n";
      }
      rt->close_session(old);
      continue;
    }
    if (text == "/yolo") {
      std::lock_guard<std::mutex> guard{st.mtx};
      bool on = !yolo_sessions.count(st.session_id);
      if (on)
        yolo_sessions.insert(st.session_id);
      else
        yolo_sessions.erase(st.session_id);
      rt->set_session_yolo(st.session_id, on);
      std::cerr << "yolo " << (on ? "on" : "off")
                << " for this session (hardline commands and deny rules "
                   "still apply)\n";
      continue;
    }
    if (text == "/rollback" || text.rfind("/rollback ", 0) == 0) {
      std::lock_guard<std::mutex> guard{st.mtx};
      chat_rollback(*rt, saved_opts, st.session_id,
                    std::string{strings::trim(text.substr(9))});
      continue;
    }
    if (text[0] == '/' && text.find(' ') == std::string::npos) {
      std::cerr << "mibyan chat: unknown command " << text
                << " (/help lists the commands)\n";
      continue;
    }
    turn_call turn = call;
    turn.prompt = line;
    std::string streamed;
    turn.on_delta = [&](const std::string& kind, const std::string& delta) {
      std::lock_guard<std::mutex> guard{st.mtx};
      if (activity)
        activity->clear_status_locked();
      if (kind == "context") {
        // What the session's system prompt was made of (shown once, when
        // the session's conversation starts).
        std::cerr << delta << std::flush;
      } else if (kind == "text") {
        streamed += delta;
        std::cout << delta << std::flush;
      } else if (kind == "restart" && !streamed.empty()) {
        streamed.clear();
        std::cout << "\n" << std::flush;
      }
    };
    {
      std::lock_guard<std::mutex> guard{st.mtx};
      turn.session_id = st.session_id;
      st.busy = true;
      st.interrupted = false;
    }
    if (activity)
      turn.on_tool = [&activity](const tool_event& ev) {
        activity->on_event(ev);
      };
    auto out = rt->run_turn(turn);
    if (activity)
      activity->end_turn();
    {
      std::lock_guard<std::mutex> guard{st.mtx};
      st.busy = false;
    }
    // Background work that ended during the turn is shown after the
    // turn's own answer (below, or before the next prompt).
    if (!out.started) {
      std::cerr << "mibyan chat: " << out.error << "\n";
      // A configuration error stops the chat before its first turn, as
      // `mibyan run` does; later ones (e.g. a removed key) do not.
      if (out.config_error && first_turn)
        return 2;
      continue;
    }
    first_turn = false;
    if (!out.session_id.empty()) {
      std::lock_guard<std::mutex> guard{st.mtx};
      if (out.session_id != st.session_id) {
        // Compression continued the conversation in a new session.
        std::cerr << "session: " << out.session_id << " (continues "
                  << st.session_id << ")\n";
        st.session_id = out.session_id;
      }
    }
    if (!out.trajectory_error.empty())
      std::cerr << "mibyan chat: trajectory not saved: "
                << out.trajectory_error << "\n";
    // The turn's own account decides: a Ctrl-C that came after the answer
    // was complete interrupts nothing.
    bool interrupted = out.interrupted;
    const auto& answer = out.final_response;
    std::lock_guard<std::mutex> guard{st.mtx};
    if (answer && !interrupted) {
      const auto& a = *answer;
      if (streamed.empty())
        std::cout << a << "\n";
      else if (streamed != a)
        std::cout << "\n" << a << "\n";
      else
        std::cout << "\n";
    } else if (!streamed.empty()) {
      std::cout << "\n";
    }
    if (interrupted) {
      std::cout << "[interrupted]\n";
    } else if (out.failed || !answer) {
      const auto& err = out.error;
      std::cerr << "mibyan chat: "
                << (err.empty() ? "the turn produced no answer" : err)
                << "\n";
    }
    std::cout << std::flush;
    announcer::flush_locked(st);
  }
  unwatch_background(*rt, watch);
  notices.reset();
  if (interactive)
    std::cout << "\n" << std::flush;
  return 0;
}

} // namespace mibyan::cli
