// File: approvals/session_channels.hpp
//
// Per-session channels: a session (an editor's ACP session, an MCP-server
// session, a scheduled run) may have its own approval and clarify channels
// in place of the runtime-wide ones (runtime::set_session_channels,
// docs/approvals.md "Per-session channels"). A delegate_task child uses its
// parent's entry: the conversation registers the child as an alias.
//
// Thread safety: every member may be called from any thread (one mutex).
// Lookups copy the callbacks out, so a caller never holds the lock while it
// asks a human.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "mibyan/approval.hpp"
#include "mibyan/clarify.hpp"

namespace mibyan {

/// One session's channels. An empty `approval` means nobody can answer for
/// this session: `context` decides (its config key, e.g. approvals.cron_mode).
/// An empty `clarify` means clarify is unavailable in this session.
struct session_channel {
  approval_callback approval;
  approval_context context = approval_context::unattended;
  clarify_callback clarify;
  /// The host approved this session's execute_code scripts as a whole (a
  /// script a person wrote and scheduled): the whole-script guard lets
  /// them run; each command they run is still checked.
  bool approve_scripts = false;
};

class session_channel_table {
public:
  /// Sets (replaces) the channels of `session`.
  void set(const std::string& session, session_channel ch);
  /// Removes the channels of `session` and every alias that points to it.
  void clear(const std::string& session);
  /// `child` uses the channels of `parent` (followed at lookup, so a later
  /// set or clear of the parent applies). Kept until forget(child).
  void alias(const std::string& child, const std::string& parent);
  /// Drops `session` as an alias (its own entry, if any, stays).
  void forget(const std::string& session);
  /// The channels that apply to `session`: its own, else its parent's
  /// (aliases followed to a bounded depth); nullopt when none is set.
  std::optional<session_channel> find(const std::string& session) const;
  /// True when no session has channels (one lock, no lookup cost otherwise).
  bool empty() const;

private:
  mutable std::mutex mtx_;
  std::map<std::string, session_channel> channels_;
  std::map<std::string, std::string> parents_;
};

} // namespace mibyan
