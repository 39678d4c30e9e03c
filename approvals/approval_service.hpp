// File: approvals/approval_service.hpp
//
// The approval gate of one runtime (docs/approvals.md): runs the pipeline
// of approvals/approval_engine.hpp for a command and decides what happens
// to a flagged one - non-interactive default deny, the smart-mode
// reviewer, the human prompt through the approval channel - and keeps the
// state: session approvals (persisted through hooks, in production the
// session store), the permanent allowlist, session /yolo and the denial
// circuit breaker.
//
// Threads: `check_command` blocks (LMDB read, reviewer call, human
// prompt) and must run on a blocking-pool thread, never on a CAF scheduler
// thread; its waits are bounded by approvals.timeout /
// approvals.guardian_timeout and end early when the call is cancelled.
// `check_script` never blocks. Every member function is thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "approvals/approval_types.hpp"
#include "base/status.hpp"
#include "approvals/session_channels.hpp"
#include "approvals/denial_breaker.hpp"

namespace mibyan {

struct options;

/// Who asks: the call's session and where the call came from.
struct approval_call {
  /// The session whose approvals apply ("" = none: nothing is remembered).
  std::string session_id;
  /// The command comes from an execute_code script (through the kernel's
  /// cell authority) rather than from the model directly.
  bool from_script = false;
  /// The tool call's cancel flag (may be null).
  const std::atomic<bool>* cancelled = nullptr;
  /// For the whole-script guard: the kernel runs in the bubblewrap sandbox,
  /// which cannot reach the host's processes, environment, memory or
  /// Mibyan's state (docs/security.md). Such a script is approved like an
  /// isolated backend; its terminal() calls are still checked one by one.
  bool isolated = false;
};

/// The decision on one command or script.
struct approval_verdict {
  bool approved = true;
  /// Blocked by a hardline pattern.
  bool hardline = false;
  /// Why it was blocked (the text for the model); "" when approved.
  std::string message;
  /// The matched description(s) or deny rule ("" when nothing matched).
  std::string description;
};

/// A reviewer model's answer text (smart mode), or why there is none:
/// unavailable (no reviewer, shutting down, the provider failed), timeout
/// or cancelled.
using guardian_reply = result<std::string>;

class approval_service {
public:
  /// Connections to the rest of the runtime. All optional.
  struct hooks {
    /// Loads / stores a session's approved pattern keys.
    std::function<std::vector<std::string>(const std::string& session)>
      load_session;
    std::function<void(const std::string& session,
                       const std::vector<std::string>& keys)>
      save_session;
    /// Asks the reviewer model (system prompt, user prompt) within
    /// `timeout`; returns soon after `*cancelled` turns true.
    std::function<guardian_reply(const std::string& session,
                                 const std::string& system,
                                 const std::string& user,
                                 std::chrono::milliseconds timeout,
                                 const std::atomic<bool>* cancelled)>
      guardian;
  };

  /// `cfg` must outlive the service.
  explicit approval_service(const options& cfg);

  void set_hooks(hooks h);

  /// The permanent allowlist kept in a store shared by every gateway
  /// (docs/storage.md, "Per-user state"). `load` reads its keys; `add`
  /// stores one: "always" answers go there instead of config.yaml, and a
  /// command the configured and known keys do not approve is checked again
  /// after `load` (so a grant made through another gateway applies here at
  /// once). Both block (store I/O); a failing `load` is logged and the
  /// keys known so far apply. Set once, before the first check.
  struct shared_allowlist {
    std::function<result<std::vector<std::string>>()> load;
    std::function<status(const std::string& key)> add;
  };
  void set_shared_allowlist(shared_allowlist s);
  /// The interactive channel (empty: none, the context's default applies).
  void set_callback(approval_callback cb);
  void set_context(approval_context c);
  /// The per-session channels that override the two above for one session
  /// (and its delegate_task children). Shared with the agent tools' clarify.
  const std::shared_ptr<session_channel_table>& channels() const {
    return channels_;
  }
  /// Session `/yolo`.
  void set_session_yolo(const std::string& session, bool on);
  bool session_yolo(const std::string& session) const;
  /// Drops a session's in-memory state (approvals, yolo, breaker count).
  void forget_session(const std::string& session);

  /// Decides on one shell command (terminal, background starts, script
  /// terminal calls). Blocking; see the file comment.
  approval_verdict check_command(const std::string& command,
                                 const approval_call& call);

  /// Decides on a file write that needs approval under pattern `key`
  /// (tools/path_policy.hpp, write_approval_key): the same steps as a
  /// flagged terminal command - the bypass (yolo, session /yolo, mode
  /// off), the permanent allowlist, the session's grants, then the
  /// context default, the reviewer and the human. `what` describes the
  /// write for the reviewer and the prompt. Blocking, like check_command.
  approval_verdict check_write(const std::string& what, const std::string& key,
                               const approval_call& call);

  /// The whole-script guard of execute_code, before any kernel work.
  /// Never blocks.
  approval_verdict check_script(const approval_call& call);

  /// The session's approved keys (loading them if needed). Blocking.
  std::set<std::string> session_keys(const std::string& session);

private:
  struct session_state {
    bool loaded = false;
    bool yolo = false;
    std::set<std::string> keys;
  };

  std::string context_key(approval_context c) const;
  bool context_approves(approval_context c) const;
  /// The channel and context for `session` (its own channels, else the
  /// runtime-wide ones). Takes the lock itself.
  session_channel channel_for(const std::string& session) const;
  std::string with_breaker(const std::string& session, std::string message);
  approval_verdict flagged(const std::string& command,
                           const std::vector<std::string>& keys,
                           const approval_call& call);
  approval_verdict ask_human(const approval_callback& cb,
                             const std::string& command,
                             const std::vector<std::string>& keys,
                             const approval_call& call,
                             const std::string& guardian_verdict);
  void grant(const std::string& session, const std::vector<std::string>& keys,
             bool always);
  /// Reads the shared allowlist into permanent_ and `known`; true when it
  /// added a key `known` did not have. Blocking; takes the lock itself.
  bool refresh_shared(std::vector<std::string>& known);

  const options& cfg_;
  mutable std::mutex mtx_;
  hooks hooks_;
  approval_callback callback_;
  approval_context context_ = approval_context::unattended;
  std::shared_ptr<session_channel_table> channels_ =
    std::make_shared<session_channel_table>();
  std::vector<std::string> permanent_;
  shared_allowlist shared_;
  std::map<std::string, session_state> sessions_;
  approvals::denial_breaker breaker_;
  std::mutex config_write_mtx_;
};

} // namespace mibyan
