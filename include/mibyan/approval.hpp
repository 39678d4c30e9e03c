// File: include/mibyan/approval.hpp
//
// The plain types an approval channel deals with: what is asked, what the
// answer can be, and which non-interactive context a runtime serves. No
// CAF; part of the public embedding API (docs/approvals.md, "Channels").
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace mibyan {

/// A human's answer to an approval prompt.
enum class approval_choice {
  deny,    ///< refuse this command
  once,    ///< allow this command this time
  session, ///< allow this pattern for the rest of the session
  always,  ///< allow this pattern permanently (config command_allowlist)
  timeout, ///< no answer in time: treated as deny
};

/// One question to a human (see docs/approvals.md, "Channels").
struct approval_prompt {
  /// The session the command belongs to.
  std::string session_id;
  /// The command (or script) as the model wrote it.
  std::string command;
  /// The matched pattern descriptions (the keys a grant approves).
  std::vector<std::string> descriptions;
  /// Which choices may be offered: `session` and `always` are withheld
  /// after a smart-mode DENY (the human may allow only this one run).
  bool allow_session = true;
  bool allow_always = true;
  /// The smart-mode verdict that led here ("" in manual mode, else
  /// "DENY", "ESCALATE" or "unavailable").
  std::string guardian_verdict;
  /// How long the human has; the channel answers `timeout` after it.
  std::chrono::seconds timeout{60};
  /// Set when the tool call is cancelled (interrupt, deadline): the
  /// channel stops waiting and answers `deny`. Never null.
  const std::atomic<bool>* cancelled = nullptr;
};

/// Asks a human. Called on a blocking-pool thread; it may block, but must
/// return within `prompt.timeout` (then with `timeout`) and soon after
/// `*prompt.cancelled` turns true. Must be thread-safe: calls of different
/// sessions may overlap.
using approval_callback = std::function<approval_choice(const approval_prompt&)>;

/// The kind of context a runtime without an approval callback serves; it
/// selects the config key deciding its default (docs/approvals.md,
/// "Non-interactive contexts").
enum class approval_context {
  unattended,   ///< embedding API, servers: approvals.unattended_mode
  single_query, ///< `mibyan run`, `mibyan tool`: approvals.single_query_mode
  cron,         ///< scheduled / batch work: approvals.cron_mode
};

} // namespace mibyan
