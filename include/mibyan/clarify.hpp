// File: include/mibyan/clarify.hpp  (public API)
//
// The plain types of the clarify channel: the model asks the user a
// question (optionally with up to four choices) and waits for the answer.
// CAF-free; part of the embedding API (runtime::set_clarify_callback,
// docs/tools.md "clarify").
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace mibyan {

/// One question from the model to the user.
struct clarify_prompt {
  /// The session that asks.
  std::string session_id;
  /// The question text (never empty).
  std::string question;
  /// Up to four suggested answers; the user may answer something else.
  std::vector<std::string> choices;
  /// How long the user has; answer "" after it.
  std::chrono::seconds timeout{600};
  /// Set when the call is cancelled (interrupt, deadline): stop waiting and
  /// answer "". Never null.
  const std::atomic<bool>* cancelled = nullptr;
};

/// Asks the user. Called on a blocking-pool thread; it may block until the
/// user answers, but must return soon after `*prompt.cancelled` turns true
/// or `prompt.timeout` passes. Returns the answer text ("" = no answer).
/// Calls are never concurrent within one runtime (clarify is serialised).
using clarify_callback = std::function<std::string(const clarify_prompt&)>;

} // namespace mibyan
