// File: include/mibyan/runtime.hpp  (public API)
//
// The embeddable entry point: one `runtime` owns a CAF actor system sized
// for the machine, the tool registry, the blocking pool, the HTTP client and
// the actors that run tools and conversations. This header is CAF-free (not
// even a forward declaration); the actor-level API is mibyan/actors.hpp.
//
//   mibyan::runtime_config cfg;           // $MIBYAN_HOME and its config.yaml
//   cfg.tools.push_back(my_host_tool);    // mibyan/host_tool.hpp
//   auto made = mibyan::runtime::create(cfg);
//   if (!made) { std::cerr << made.error; return 1; }
//   std::unique_ptr<mibyan::runtime> rt = std::move(*made);
//   mibyan::agent a{*rt};                 // mibyan/agent.hpp
//   mibyan::turn_result r = a.run("hello").get();   // mibyan/turn.hpp
//
// Thread safety: all public member functions may be called from any
// thread concurrently. See docs/embedding.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "mibyan/host_tool.hpp"
#include "mibyan/approval.hpp"
#include "mibyan/clarify.hpp"
#include "mibyan/pending.hpp"
#include "mibyan/status.hpp"
#include "mibyan/turn.hpp"

namespace mibyan {

/// How an application configures a runtime. Everything not set here comes
/// from the configuration file (docs/configuration.md).
struct runtime_config {
  /// The state directory ("" = $MIBYAN_HOME, else ~/.mibyan): sessions,
  /// kernels' files, `.env` secrets.
  std::string home;
  /// A YAML configuration file to read instead of `<home>/config.yaml`
  /// ("" = that file, or $MIBYAN_CONFIG when set). A missing file given
  /// here is an error; a missing default file means defaults.
  std::string config_file;
  /// Overrides of `model.provider`, `model.default`, `model.base_url` and
  /// `model.api_key` (each "" = keep the file's value).
  provider_config provider;
  /// Overrides of `runtime.scheduler_threads` / `runtime.blocking_threads`
  /// (<= 0 = keep); checked against the keys' ranges like the file's values.
  int64_t scheduler_threads = 0;
  int64_t blocking_threads = 0;
  /// The application's own tools (mibyan/host_tool.hpp).
  std::vector<host_tool> tools;
};

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
  /// Provider overrides (each "" = the configuration's value, see
  /// provider_config).
  provider_config provider;
  /// Iteration cap of the turn; <= 0 means `agent.max_turns`.
  int64_t max_iterations = 0;
  /// Toolsets offered to the model (empty = config `agent.toolsets`, else
  /// all; docs/tools.md "Toolsets"). An unknown name fails the turn with
  /// config_error.
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
  /// Append the finished turn to a trajectory file (docs/storage.md)
  /// even when `agent.save_trajectories` is off.
  bool save_trajectory = false;
  /// Receives tool activity (a start, then an end per call) on a runtime
  /// thread while the turn runs; all calls happen before the turn's result
  /// is delivered. May be empty.
  std::function<void(const tool_event&)> on_tool;
  /// Messages stored before `prompt` when this call creates the session
  /// (ignored for an existing one; no "system" messages). Used for
  /// stateless HTTP requests whose messages are the whole history
  /// (docs/serve.md).
  std::vector<chat_message> history;
  /// The working directory of a session this call creates ("" = the
  /// runtime's current directory; ignored for an existing session, which
  /// keeps its stored one). Must be an existing directory, else the turn
  /// fails with config_error.
  std::string cwd;
  /// A JSON object as text stored with a session this call creates (""
  /// = none; at most 16 KiB), e.g. {"cron_job_id": "..."}; read back as the
  /// session's `metadata`. Ignored for an existing session.
  std::string metadata;
  /// Idempotency key of this turn ("" = none; at most 200 printable ASCII
  /// bytes, else the turn fails with config_error). A turn whose key the
  /// session already holds does not store its prompt again and does not
  /// run again: when that earlier attempt was answered, its answer comes
  /// back (result field "replayed": true); when it ended without an
  /// answer (its gateway died, the provider failed), the turn resumes from
  /// the stored history; while it still runs, this turn waits for it (the
  /// turns of a session run in order). docs/cluster.md, "Idempotent turns".
  std::string turn_key;
};

/// One session's own channels (set_session_channels): they replace the
/// runtime-wide approval and clarify channels for that session and its
/// delegate_task children.
struct session_channels {
  /// Asks for this session (same contract as approval_callback); empty:
  /// nobody can answer here and `context` decides.
  approval_callback approval;
  /// The config key deciding flagged commands when `approval` is empty
  /// (cron: approvals.cron_mode). Hardline commands are never allowed.
  approval_context context = approval_context::unattended;
  /// Answers this session's clarify questions; empty: clarify is
  /// unavailable in this session. Not serialised with other sessions.
  clarify_callback clarify;
  /// The host approved this session's execute_code scripts as a whole
  /// (e.g. a script a person wrote and scheduled): the whole-script guard
  /// lets them run, and each command a script runs is still checked.
  bool approve_scripts = false;
};

class runtime {
public:
  /// Builds a runtime from `cfg` (reads the configuration file) and runs
  /// the message-type self-test. Fails with config_invalid (a bad config
  /// file, an override out of its key's range, a bad host tool: the message
  /// names the key or the tool), or another code when start-up fails (an
  /// unusable home, the sandbox required but unavailable). Every create
  /// also hardens the process once (docs/security.md).
  static result<std::unique_ptr<runtime>> create(const runtime_config& cfg);

  ~runtime();
  runtime(const runtime&) = delete;
  runtime& operator=(const runtime&) = delete;

  /// Runs one tool call through the dispatcher and waits for its result.
  /// Blocks the calling thread (not a scheduler thread). Tool failures are
  /// results, never exceptions.
  tool_outcome call_tool(const tool_call_request& call);

  /// Runs one tool call; `done` is invoked once, on a runtime thread (the
  /// I/O thread that also serves execute_code kernels), one call's `done`
  /// at a time. Keep `done` short and never block or wait in it (no
  /// `call_tool`, no waiting for another call): hand longer work to a
  /// thread of your own. Calling `call_tool_async` from `done` is fine.
  /// Never blocks; any thread.
  void call_tool_async(const tool_call_request& call,
                       std::function<void(tool_outcome)> done);

  /// Runs one user turn of the agent loop and waits for its result
  /// (`started` false: it could not start, `error` says why). Turns of one
  /// session run one after another (in call order); turns of different
  /// sessions run concurrently. Blocks the calling thread.
  turn_result run_turn(const turn_call& call);

  /// Runs one user turn; `done` is invoked once, on a runtime thread, after
  /// the last `on_delta` / `on_tool` call (or on the calling thread, before
  /// this returns, when the turn cannot start). Never blocks: it may be
  /// called from a runtime thread (e.g. from another turn's `done`). Turns
  /// of one session run in arrival order at its conversation; callers that
  /// need call order send the next turn from the previous one's `done`
  /// (mibyan::agent does).
  void run_turn_async(const turn_call& call,
                      std::function<void(turn_result)> done);

  /// Cancels the running turn of `session_id` (its provider call and
  /// tools) and running calls (and execute_code cells) of `session_id`.
  void interrupt(const std::string& session_id, const std::string& reason);

  /// Cancels one running call of `session_id`, the one started with
  /// `tool_call_request::call_id == call_id`: it answers with a
  /// "cancelled" result (an execute_code cell: its kernel is killed when
  /// the cell runs, a queued cell is dropped); the session's other calls
  /// and its turn go on. Nothing happens when no such call runs. Never
  /// blocks; any thread.
  void cancel_call(const std::string& session_id, const std::string& call_id,
                   const std::string& reason);

  /// Ends a session: kills its execute_code kernels (and those of its
  /// subagents, owners "<session_id>::child::<id>") and drops its
  /// conversation (a turn still running fails; the next turn reloads the
  /// stored history).
  void close_session(const std::string& session_id);

  /// Kernel counters as JSON ({"kernels","prestarted","spawned","evicted",
  /// "reaped"}); blocks the caller until the registry answers, at most 5 s,
  /// then returns "{}". Not to be called from a runtime thread, nor while
  /// holding a lock that a callback of this runtime takes.
  std::string kernel_stats();

  /// Approvals (docs/approvals.md). The host's approval channel: called
  /// on a runtime thread for each flagged command that needs a human (see
  /// approval_callback). Without one the runtime is non-interactive and
  /// flagged commands follow the context's default (deny unless
  /// configured otherwise).
  void set_approval_callback(approval_callback cb);
  /// Which config key decides for flagged commands when there is no
  /// callback (default: unattended).
  void set_approval_context(approval_context c);
  /// Session `/yolo`: approve every command of the session that is not
  /// hardline or denied by a rule. Cleared with close_session.
  void set_session_yolo(const std::string& session_id, bool on);
  /// Per-session channels (an editor's session, a scheduled run): replace
  /// the runtime-wide channels for `session_id` until cleared. Any thread;
  /// takes effect for the next approval or question of the session.
  void set_session_channels(const std::string& session_id,
                            session_channels ch);
  void clear_session_channels(const std::string& session_id);

  /// The clarify channel (docs/tools.md, "clarify"): called on a runtime
  /// thread when the model asks the user a question. Without one, clarify
  /// answers with an error telling the model to proceed on its own
  /// judgement. An empty function removes it.
  void set_clarify_callback(clarify_callback cb);

  /// Pending approvals and questions (docs/embedding.md, "Pending
  /// approvals and questions"). Opt-in: makes the runtime's pending
  /// registry the approval channel (`approvals`) and / or the clarify
  /// channel (`clarify`), replacing a callback set before (a later
  /// set_approval_callback / set_clarify_callback replaces it in turn;
  /// false leaves that channel as it is). A flagged command then waits up
  /// to approvals.timeout, a question up to clarify.timeout, for an answer
  /// through answer_approval / answer_clarification; no answer in time is
  /// a deny / no answer, and the turn goes on. Each waiting request holds
  /// one blocking-pool thread (runtime.blocking_threads).
  struct pending_channels {
    bool approvals = true;
    bool clarify = true;
  };
  void use_pending_channels(pending_channels which);
  /// The requests of `kind` waiting now, oldest first. Any thread.
  std::vector<pending_request> pending_requests(pending_kind kind) const;
  /// Answers a waiting approval with once / session / always / deny
  /// (session and always remember the grant as the terminal prompt does).
  /// Never blocks; any thread.
  pending_answer answer_approval(const std::string& id,
                                 approval_choice choice);
  /// Answers a waiting question with `text` (non-empty). Never blocks.
  pending_answer answer_clarification(const std::string& id,
                                      const std::string& text);
  /// Calls `fn` on a runtime thread for every request added or ended from
  /// now on (quick, never blocking; it may call the functions above).
  /// Returns a token for unwatch_pending; after unwatch_pending returns,
  /// `fn` may still run once (hold what it touches weakly).
  uint64_t watch_pending(std::function<void(const pending_event&)> fn);
  void unwatch_pending(uint64_t token);

private:
  struct impl;
  friend struct runtime_access; // runtime/runtime.hpp (library-internal)
  explicit runtime(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

} // namespace mibyan
