// File: include/mibyan/pending.hpp  (public API)
//
// The plain types of pending requests: approvals and clarify questions
// that wait in the runtime until a program answers them (over HTTP in
// `mibyan serve`, or through runtime::answer_approval /
// answer_clarification in an embedding host). CAF-free; see
// docs/embedding.md, "Pending approvals and questions".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mibyan {

/// What a pending request asks.
enum class pending_kind {
  approval, ///< a flagged command waits for once / session / always / deny
  clarify,  ///< the model's question waits for an answer text
};

/// One request waiting for an answer.
struct pending_request {
  pending_kind kind = pending_kind::approval;
  /// Unguessable (128 random bits): "apr_" (approvals) or "clr_"
  /// (clarify) followed by 32 lowercase hex digits.
  std::string id;
  /// The session whose tool call waits.
  std::string session_id;
  /// Approvals: the command as the model wrote it, the matched pattern
  /// descriptions and the smart-mode verdict ("" in manual mode).
  std::string command;
  std::vector<std::string> descriptions;
  std::string guardian_verdict;
  /// Clarify: the question.
  std::string question;
  /// Approvals: the answers that may be given, of "once", "session",
  /// "always", "deny" (after a smart-mode DENY only "once" and "deny").
  /// Clarify: the suggested answers (any text is accepted).
  std::vector<std::string> choices;
  /// Unix milliseconds: when it was asked, and when no answer becomes a
  /// deny (approvals) or an empty answer (clarify).
  int64_t created_at_ms = 0;
  int64_t expires_at_ms = 0;
};

/// The result of answering a pending request.
enum class pending_answer {
  ok,               ///< taken: the waiting tool call goes on with it
  unknown,          ///< no request with that id was ever pending here
  ended,            ///< it ended already (answered, timed out, cancelled)
  already_answered, ///< an answer was taken; this second one is not
  not_offered,      ///< approvals: that choice is not among `choices`
};

/// A change of the pending set, as a watcher sees it.
struct pending_event {
  enum class type { added, ended };
  type what = type::added;
  pending_request request;
  /// For `ended`: "once", "session", "always" or "deny" (an answered
  /// approval), "answered" (an answered question), "timeout" or
  /// "cancelled" (the call was interrupted, or the runtime stops).
  std::string outcome;
};

} // namespace mibyan
