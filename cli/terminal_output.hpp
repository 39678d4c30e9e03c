// File: cli/terminal_output.hpp
//
// What `mibyan chat` and `mibyan run` show on a terminal besides the answer
// (docs/agent_loop.md, "What the terminal shows"):
//   - each tool call as it starts (name and a short form of its
//     arguments), a status line with a spinner and the elapsed seconds
//     while calls run, and at the end the duration with an ok or error
//     mark; a delegate_task child's calls indented under it;
//   - log lines kept out of the conversation (route_logs_to_file).
// Nothing of this is used when stdout is not a terminal.
//
// Thread safety: tool_activity's methods take the caller's output mutex
// (the one that also guards the answer text) themselves, except those
// named *_locked, which expect it held. A ticker thread redraws the
// status line.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>

#include "cli/commands.hpp"

#include "mibyan/turn.hpp"

namespace mibyan {
struct options;
}

namespace mibyan::cli {

/// In interactive use log lines must not interleave with the
/// conversation: unless --log-level or MIBYAN_LOG_LEVEL asks for stderr,
/// they go to $MIBYAN_HOME/logs/<name>.log only (created 0600; the
/// directory 0700). Returns the file used ("" when stderr stays on).
std::string route_logs_to_file(const global_flags& flags, const options& o,
                               const std::string& name);

/// A short form of a call's arguments: the command, path, first line of a
/// script, goal, query or URL; else the compact JSON, cut to `max_chars`.
std::string short_arguments(const std::string& tool,
                            const std::string& arguments_json,
                            size_t max_chars = 72);

/// Whether a tool result (JSON text) reports an error: an "error" member
/// that is not null/empty, a non-zero exit code, or a delegate_task
/// result with a task that did not end ok.
bool result_is_error(const std::string& result_json);

class tool_activity {
public:
  tool_activity(std::ostream& out, std::mutex& mtx);
  ~tool_activity();
  tool_activity(const tool_activity&) = delete;
  tool_activity& operator=(const tool_activity&) = delete;

  /// Handles a tool event of the runtime (docs/embedding.md, "Tool
  /// events").
  void on_event(const tool_event& e);

  /// Erases the status line (call with the mutex held, before writing
  /// anything else to the terminal).
  void clear_status_locked();

  /// Forgets running calls (the turn ended) and erases the status line.
  void end_turn();

  /// While paused (an approval prompt waits for an answer) the status
  /// line is neither drawn nor redrawn.
  void set_paused(bool paused);

private:
  struct running_call {
    std::string name;
    int depth = 0;
    std::chrono::steady_clock::time_point start;
  };
  void tick();
  void draw_status_locked();

  std::ostream& out_;
  std::mutex& mtx_;
  std::map<std::string, running_call> running_; // by call id
  std::string last_started_;
  bool status_shown_ = false;
  bool paused_ = false; // guarded by mtx_
  size_t frame_ = 0;
  bool stop_ = false;
  std::condition_variable cv_;
  std::mutex tick_mtx_;
  std::thread ticker_;
};

} // namespace mibyan::cli
