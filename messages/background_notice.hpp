// File: messages/background_notice.hpp
//
// One background event for a conversation (docs/agent_loop.md,
// "Background deliveries"): a delegate_task child started with
// `background: true` ended, or a `terminal` process started with
// `notify_on_complete: true` exited. The conversation keeps it until the
// start of its next turn, where `text` becomes a user-role message before
// the user's own. Plain data with inspect().
#pragma once

#include <cstdint>
#include <string>

#include "caf/meta/type_name.hpp"

namespace mibyan {

struct background_notice {
  /// The conversation's session (the first session of its chain).
  std::string session_id;
  /// "delegate" (a background child) or "process" (a terminal process).
  std::string kind;
  /// The task id (the child's session id) or the process id (proc_...).
  std::string id;
  /// delegate: ok | error | interrupted; process: exited | signal.
  std::string status;
  /// One line for announcements ("finished (ok): <summary start>").
  std::string headline;
  /// The message delivered into the conversation; it starts with the
  /// marker "[background <kind> <id>: <status>]".
  std::string text;
  /// Unix milliseconds.
  int64_t at_ms = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, background_notice& x) {
  return f(caf::meta::type_name("mibyan::background_notice"), x.session_id,
           x.kind, x.id, x.status, x.headline, x.text, x.at_ms);
}

} // namespace mibyan
