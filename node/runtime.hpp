// File: node/runtime.hpp
//
// The embeddable entry point: one `runtime` owns a CAF actor system sized
// for the machine, the tool registry, the blocking pool, the HTTP client and
// the actors that route tool calls. No CAF types leak into this header, so
// embedding applications compile quickly.
//
//   mibyan::options opts = mibyan::load_options().opts;
//   std::string err;
//   auto rt = mibyan::runtime::create(opts, &err);
//   auto res = rt->call_tool({"session-1", "call-1", "read_file",
//                             R"({"path":"README.md"})"});
//
// Thread safety: all public member functions may be called from any
// thread concurrently.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/options.hpp"
#include "tools/tool.hpp"

namespace caf {
class actor_system;
}

namespace mibyan {

class tool_registry;
class session_store;

/// A tool call as the embedding application sees it.
struct tool_call_request {
  std::string session_id;
  std::string call_id;
  std::string tool;
  std::string args_json;
  /// Working directory for this call ("" = the runtime's default cwd).
  std::string cwd;
};

/// The answer to a tool_call_request.
struct tool_outcome {
  /// The result object as JSON text (tool errors are {"error": ...}).
  std::string result_json;
  int64_t duration_us = 0;
  bool timed_out = false;
};

/// One user turn as the embedding application asks for it.
struct turn_call {
  /// The session to continue; "" creates a new one. An id the store does
  /// not know yet creates a session with that id.
  std::string session_id;
  /// The user's message.
  std::string prompt;
  /// Provider overrides ("" = `model.provider`, `model.default`,
  /// `model.base_url` of the configuration; the key is resolved as in
  /// providers/provider_profile.hpp).
  std::string provider;
  std::string model;
  std::string base_url;
  std::string api_key;
  /// Iteration cap of the turn; <= 0 means `agent.max_turns`.
  int64_t max_iterations = 0;
  /// Toolsets offered to the model (empty = all).
  std::vector<std::string> toolsets;
  /// Ask the provider for a stream.
  bool stream = true;
  /// Receives streamed fragments (kind "text", "reasoning" or "restart")
  /// on a runtime thread while the turn runs; all calls happen before
  /// `run_turn` returns. May be empty.
  std::function<void(const std::string& kind, const std::string& text)>
    on_delta;
  /// Recorded as the session's source when it is created.
  std::string source = "api";
  /// Append the finished turn to a trajectory file (storage/trajectory.hpp)
  /// even when `agent.save_trajectories` is off.
  bool save_trajectory = false;
  /// Messages stored before `prompt` when the session is created by this
  /// call (ignored for an existing session): a JSON array of messages in
  /// the OpenAI chat format ({"role","content","tool_calls",
  /// "tool_call_id","name"}); role "system" is not allowed. Used for
  /// stateless HTTP requests whose messages are the whole history
  /// (docs/serve.md). Honoured by `run_turn_async`.
  std::string history_json;
};

/// The answer to a turn_call.
struct turn_outcome {
  /// The turn result object (agent_loop.md §13) as JSON text; "" when the
  /// turn could not start (see `error`).
  std::string result_json;
  /// The session the turn ran in.
  std::string session_id;
  /// Why the turn could not start ("" when it ran; a turn that ran and
  /// failed says so inside `result_json`).
  std::string error;
  /// The cause of `error` is the configuration (no provider, no key, bad
  /// toolset): fix it before retrying.
  bool config_error = false;
  /// Why saving the trajectory failed ("" when saved or not asked for).
  std::string trajectory_error;
};

class runtime {
public:
  /// Builds a runtime from `opts` and runs the message-type self-test.
  /// Returns nullptr and sets `*error` if start-up fails (e.g. an
  /// unregistered message type, an unusable $MIBYAN_HOME). `extra_tools`
  /// are offered next to the core tools (an embedding application's own
  /// tools; a tool with a core tool's name replaces it).
  static std::unique_ptr<runtime>
  create(options opts, std::string* error,
         std::vector<std::unique_ptr<tool>> extra_tools = {});

  ~runtime();
  runtime(const runtime&) = delete;
  runtime& operator=(const runtime&) = delete;

  /// Runs one tool call through the dispatcher and waits for its result.
  /// Blocks the calling thread (not a scheduler thread). Tool failures are
  /// results, never exceptions.
  tool_outcome call_tool(const tool_call_request& call);

  /// Runs one tool call; `done` is invoked once, on a runtime thread.
  void call_tool_async(const tool_call_request& call,
                       std::function<void(tool_outcome)> done);

  /// Runs one user turn of the agent loop and waits for its result. Turns
  /// of one session run one after another (in call order); turns of
  /// different sessions run concurrently. Blocks the calling thread.
  turn_outcome run_turn(const turn_call& call);

  /// Runs one user turn like `run_turn` without blocking the caller:
  /// `done` is invoked once, on a runtime thread (keep it short; post real
  /// work elsewhere), after every `on_delta` call. Besides "text",
  /// "reasoning" and "restart", `on_delta` receives "tool_start" with a
  /// JSON object {"id","name","arguments"} and "tool_end" with
  /// {"id","name","duration_ms","timed_out"} as text. Trajectories are saved only by
  /// `run_turn`.
  void run_turn_async(const turn_call& call,
                      std::function<void(turn_outcome)> done);

  /// The session store the runtime writes (nullptr when it could not be
  /// opened). Reads may run on any thread; writes other than deletes go
  /// through the runtime.
  std::shared_ptr<session_store> sessions() const;

  /// Cancels the running turn of `session_id` (its provider call and
  /// tools) and running calls (and execute_code cells) of `session_id`.
  void interrupt(const std::string& session_id, const std::string& reason);

  /// Ends a session: kills its execute_code kernels (and those of its
  /// subagents, owners "<session_id>::child::<id>") and drops its
  /// conversation (a turn still running fails; the next turn reloads the
  /// stored history).
  void close_session(const std::string& session_id);

  /// Kernel counters as JSON ({"kernels","prestarted","spawned","evicted",
  /// "reaped"}); blocks briefly.
  std::string kernel_stats();

  const tool_registry& tools() const;
  const options& config() const;

  /// The underlying actor system (for embedding applications that spawn
  /// their own actors next to ours).
  caf::actor_system& system();

  struct impl;

private:
  explicit runtime(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

/// Serialises and deserialises one default instance of every message type
/// in the type-ID block through `sys`. Returns one line per failure (empty:
/// all passed). CAF 0.17 silently sends an empty message for an
/// unregistered type, so this runs at every start-up.
std::vector<std::string> message_self_test(caf::actor_system& sys);

} // namespace mibyan
