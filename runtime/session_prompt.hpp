// File: runtime/session_prompt.hpp
//
// The system prompt a conversation starts with (docs/agent_loop.md, "The
// frozen system prompt"): for a session that already has a stored prompt,
// that prompt byte for byte; else a new one, assembled from
// $MIBYAN_HOME/SOUL.md, the base prompt, the project's context files
// (agent/context_files.hpp) and the memory snapshot, and stored for the
// session (storage/prompt_store.hpp).
//
// Blocks on file and store I/O: call it where the memory snapshot is read
// (the turn caller's thread, never a scheduler thread). Never throws; a
// problem becomes a warning and the turn goes on.
#pragma once

#include <string>
#include <vector>

namespace mibyan {

struct options;
class prompt_store;
class user_state_store;
class session_store;

struct session_prompt {
  std::string text;
  /// The stored prompt's hash ("" when it could not be stored).
  std::string hash;
  /// The session's stored prompt was replayed (nothing was read from the
  /// project or the memory files).
  bool replayed = false;
  /// Labels of the context files in a new prompt, SOUL.md first.
  std::vector<std::string> files;
  /// For people: skipped or flagged files, a missing stored prompt, a
  /// prompt that could not be stored.
  std::vector<std::string> warnings;

  /// The lines `mibyan chat` shows when the session starts ("context: ..."
  /// and "warning: ...").
  std::string notice() const;
};

struct session_prompt_request {
  std::string session_id;
  /// The session's working directory.
  std::string cwd;
  /// The session row exists (a resume) and has `message_count` messages.
  bool exists = false;
  int64_t message_count = 0;
  /// Store a new prompt for the session (its row must exist).
  bool store = true;
  /// The shared per-user state the memory block is read from (null = the
  /// memory files of cfg.home; docs/storage.md, "Per-user state"). Must
  /// outlive the call.
  const user_state_store* user_state = nullptr;
};

/// See the file comment. `store` and `prompts` may be null (nothing is
/// replayed or stored). `base_prompt(cwd)` is the fixed part
/// (actors/conversation.hpp's build_system_prompt). A new prompt is
/// stored when `req.store`; call this once the session row exists, so
/// that `prompt_store::collect` never takes the reference for a leftover.
session_prompt resolve_session_prompt(
  const options& cfg, session_store* store, prompt_store* prompts,
  const session_prompt_request& req,
  std::string (*base_prompt)(const std::string& cwd));

/// Stores `prompt.text` as the prompt of `session_id` and sets its hash;
/// a failure becomes a warning in `prompt.warnings` (and the log).
void store_session_prompt(prompt_store& prompts,
                          const std::string& session_id,
                          session_prompt& prompt);

/// A new prompt from the current files (the memory block from
/// `user_state` when given), not stored.
session_prompt compose_session_prompt(
  const options& cfg, const std::string& cwd,
  std::string (*base_prompt)(const std::string& cwd),
  const user_state_store* user_state = nullptr);

} // namespace mibyan
