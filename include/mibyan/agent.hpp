// File: include/mibyan/agent.hpp  (public API)
//
// One ordered conversation on a runtime: a session whose turns run one
// after another. Many agents run concurrently on one runtime. CAF-free.
//
//   mibyan::agent_config ac;
//   ac.on_text = [](const std::string& t) { std::cout << t << std::flush; };
//   mibyan::agent a{*rt, ac};
//   mibyan::turn_result r = a.run("What is in README.md?").get();
//   if (r.final_response) std::cout << *r.final_response;
//
// Thread safety: every member function may be called from any thread.
// Callbacks run on runtime threads, one at a time per agent and never
// after the turn's completion; they must not block for long and must not
// wait for a result of the same agent.
#pragma once

#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "mibyan/runtime.hpp"
#include "mibyan/turn.hpp"

namespace mibyan {

/// How an agent talks to its model, and what it reports while it works.
struct agent_config {
  /// The session to continue or create under this id ("" = a new id, see
  /// agent::session_id()).
  std::string session_id;
  /// Provider overrides (each "" = the configuration's value, see
  /// provider_config in mibyan/turn.hpp).
  provider_config provider;
  /// Toolsets offered to the model (empty = config `agent.toolsets`, else
  /// all, host tools included; docs/tools.md "Toolsets").
  std::vector<std::string> toolsets;
  /// Recorded as the session's source.
  std::string source = "embed";
  /// Streamed answer text and reasoning, as they arrive.
  std::function<void(const std::string& text)> on_text;
  std::function<void(const std::string& text)> on_reasoning;
  /// A tool call starts (call_id, tool, args_json) / ends (result_json,
  /// duration_us too); mibyan/turn.hpp.
  std::function<void(const tool_event&)> on_tool_start;
  std::function<void(const tool_event&)> on_tool_end;
};

/// Per-turn settings.
struct turn_options {
  /// Iteration cap of the turn; <= 0 means `agent.max_turns`.
  int64_t max_iterations = 0;
  /// Ask the provider for a stream (on_text then sees fragments).
  bool stream = true;
};

class agent {
public:
  /// Opens a conversation on `rt`, which must outlive the agent.
  explicit agent(runtime& rt, agent_config cfg = {});
  /// Closes the agent (see close()).
  ~agent();
  agent(const agent&) = delete;
  agent& operator=(const agent&) = delete;

  /// Queues one user turn. Turns of one agent run one after another in
  /// call order, also when `run` is called from several threads at once.
  /// The future is ready when the turn ends with its result
  /// (mibyan/turn.hpp); a closed agent answers at once with `error` set
  /// and `started` false.
  std::future<turn_result> run(std::string message, turn_options opts = {});

  /// As above; `done` is called once, on a runtime thread, when the turn
  /// ends (or at once, on this thread, when the agent is closed).
  void run(std::string message, turn_options opts,
           std::function<void(turn_result)> done);

  /// Interrupts the running turn: its provider call and tools are
  /// cancelled and the turn ends as interrupted. Queued turns still run.
  void interrupt(const std::string& reason = "interrupted by the host");

  /// Ends the agent: fails queued turns, interrupts the running turn and,
  /// once it has ended (and been stored), disposes of the session's
  /// execute_code kernels and conversation. Never blocks; idempotent; the
  /// stored session stays and can be resumed by a new agent with its id.
  void close();

  /// The session id (fixed at construction).
  const std::string& session_id() const;

  struct impl;

private:
  std::shared_ptr<impl> impl_;
};

} // namespace mibyan
