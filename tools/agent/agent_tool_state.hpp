// File: tools/agent/agent_tool_state.hpp
//
// Per-runtime state the agent tools (memory, skills, todo, session_search,
// clarify) share across calls: the session store, the host's clarify
// channel, each session's active skills (whose required environment
// variables terminal and execute_code pass through) and each session's todo
// list. One instance per runtime, reached through tool_context::agent.
//
// Thread safety: every member function may be called from any thread; a
// mutex guards the mutable parts. The store pointer is set once before the
// first tool call and read-only afterwards.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "base/json.hpp"
#include "approvals/session_channels.hpp"
#include "mibyan/clarify.hpp"

namespace mibyan {

class session_store;
class user_state_store;     // storage/user_state_store.hpp
class cron_service;
struct client_file_access; // tools/client_files.hpp
class tool_registry;        // tools/registry.hpp
class file_checkpointer;    // tools/file_checkpointer.hpp

/// A background process started with notify_on_complete ended
/// (docs/tools.md, "Background processes").
struct process_exit_notice {
  /// The session that started it (the conversation's tool session).
  std::string session_id;
  std::string process_id;
  std::string command;
  /// "exited" or "signal" (process_snapshot::completion_reason).
  std::string status;
  int exit_code = -1;
  /// The last lines of its output, rendered as the process tool shows it.
  std::string output_tail;
};

class agent_tool_state {
public:
  /// The session store (null when it could not be opened). Set once by the
  /// runtime before any tool call.
  std::shared_ptr<session_store> store;
  /// Per-user state shared by every gateway over one store (memory,
  /// skills; docs/storage.md, "Per-user state"): set once by the runtime
  /// before any tool call when the store is shared (PostgreSQL); null =
  /// the files of $MIBYAN_HOME.
  std::shared_ptr<user_state_store> user_state;
  /// The verbs of scheduled jobs (cron/cron_service.hpp) for the cronjob
  /// tool; set once by the runtime before any tool call (never null in a
  /// runtime; null in unit tests that build the state alone).
  std::shared_ptr<cron_service> cron;
  /// When the file tools take checkpoints (docs/checkpoints.md); set once
  /// by the runtime before any tool call (null in unit tests that build
  /// the state alone). Used only with checkpoints.enabled.
  std::shared_ptr<file_checkpointer> checkpoints;

  /// The host's clarify channel (empty = none: clarify answers with an
  /// error telling the model to proceed on its own judgement).
  /// `serialised`: questions are asked one at a time per runtime (a
  /// terminal, a host callback); false for a channel that takes questions
  /// of several sessions at once (the pending registry).
  void set_clarify(clarify_callback cb, bool serialised = true);
  clarify_callback clarify(bool* serialised = nullptr) const;
  /// The clarify channel of `session_id`: its per-session channel when it
  /// has one (never serialised: the session's host takes its own
  /// questions), else the runtime-wide one above.
  clarify_callback clarify_for(const std::string& session_id,
                               bool* serialised = nullptr) const;
  /// Delivers a notify_on_complete process's end to its session's
  /// conversation (the runtime's; empty: nobody is told). Set once by the
  /// runtime before any tool call; called on the process registry's
  /// reader thread, so it must return promptly and never block.
  std::function<void(process_exit_notice)> on_process_exit;
  /// The per-session channels (approvals/session_channels.hpp), shared
  /// with the approval service. Set once by the runtime; may be null.
  std::shared_ptr<session_channel_table> channels;
  /// Serialises clarify questions (one at a time per runtime).
  std::mutex& clarify_mutex() { return clarify_mtx_; }

  /// Marks skill `skill` active in `session_id` with its required
  /// environment variable names (docs/tools.md, "Skills").
  void activate_skill(const std::string& session_id, const std::string& skill,
                      std::vector<std::string> env_names);
  /// The active skills of `session_id`, sorted.
  std::vector<std::string> active_skills(const std::string& session_id) const;
  /// Makes the skills active in `from` active in `to` as well (a
  /// delegate_task child inherits its parent's skill variables); later
  /// activations in either session stay their own.
  void inherit_skills(const std::string& from, const std::string& to);
  /// The variable names the active skills of `session_id` pass through
  /// (sorted, unique).
  std::vector<std::string> skill_env(const std::string& session_id) const;

  /// The cached todo list of `session_id`; false when none is cached.
  bool todos(const std::string& session_id, json::value* out) const;
  void set_todos(const std::string& session_id, json::value list);

  /// The file access through a client (an editor) for `session_id`
  /// (tools/client_files.hpp); null removes it. client_files returns null
  /// when the session has none.
  void set_client_files(const std::string& session_id,
                        std::shared_ptr<const client_file_access> files);
  std::shared_ptr<const client_file_access>
  client_files(const std::string& session_id) const;

  /// Tools only `session_id` sees, next to the runtime's (the MCP servers
  /// an ACP client started for the session, docs/acp.md); null removes
  /// them. Offered to the session's turns whatever its toolsets; a name of
  /// the runtime's registry wins over one of these.
  void set_session_tools(const std::string& session_id,
                         std::shared_ptr<const tool_registry> tools);
  std::shared_ptr<const tool_registry>
  session_tools(const std::string& session_id) const;

  /// Drops everything kept for `session_id` (the runtime's close_session).
  void forget_session(const std::string& session_id);

private:
  mutable std::mutex mtx_;
  clarify_callback clarify_;
  bool clarify_serialised_ = true;
  std::mutex clarify_mtx_;
  std::map<std::string, std::map<std::string, std::vector<std::string>>>
    skills_;
  std::map<std::string, json::value> todos_;
  std::map<std::string, std::shared_ptr<const client_file_access>> files_;
  std::map<std::string, std::shared_ptr<const tool_registry>> tools_;
};

/// `base` (config `terminal.env_passthrough`) plus the variables of the
/// skills active in `session_id`; `state` may be null.
std::vector<std::string> passthrough_for(const std::vector<std::string>& base,
                                         const agent_tool_state* state,
                                         const std::string& session_id);

} // namespace mibyan
