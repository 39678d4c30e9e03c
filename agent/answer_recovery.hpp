// File: agent/answer_recovery.hpp
//
// The recovery gates of the final-answer path (docs/agent_loop.md, "Final
// answer recovery"): what the loop does with an answer that shows nothing,
// one that holds only reasoning, and one the output limit cut off. Pure
// decisions and counters; the conversation actor applies them.
//
// Thread safety: plain values, used by one turn.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "messages/chat.hpp"

namespace mibyan {

/// Returns `text` without reasoning blocks (<think>, <thinking>,
/// <reasoning>, <REASONING_SCRATCHPAD>, <thought>; case-insensitive), stray
/// <tool_call>/<function_call> markup, and everything after an opening
/// tag that is never closed; then trimmed.
std::string strip_reasoning_tags(std::string_view text);

/// True when every call is a housekeeping tool (memory, todo,
/// skill_manage, session_search) and there is at least one.
bool only_housekeeping_calls(const std::vector<tool_call>& calls);

/// Text of the nudge sent once per turn after an empty answer.
extern const char* const empty_answer_nudge;
/// Text of the instruction sent after an answer cut at the length limit.
extern const char* const length_continue_prompt;

/// Counters of one turn and the next step for each kind of bad answer.
class answer_recovery {
public:
  enum class step {
    /// Use the text of the previous assistant message (it had text and
    /// only housekeeping calls).
    use_previous,
    /// Append a synthetic empty assistant message and a user nudge
    /// (request copy only), then call again. Once per turn.
    nudge,
    /// Append the reasoning as an assistant prefill and call again (<= 2).
    prefill,
    /// Call again without appending anything (<= 3).
    retry,
    /// Recovery ran out: exit empty_response_exhausted.
    give_up,
  };

  /// The next step for an answer with no visible text. `has_reasoning`:
  /// the answer carried reasoning; `previous_text`: the previous
  /// assistant message had text and only housekeeping calls.
  step on_empty(bool has_reasoning, bool previous_text);

  /// An answer without tool calls stopped at the length limit: returns
  /// true when it may be continued (at most 3 continuations), false when
  /// the turn must end as truncated.
  bool continue_after_length();

  /// A tool-call answer was cut at the length limit: returns true when
  /// the call may be retried with a larger output budget (at most 4
  /// retries).
  bool retry_truncated_calls();

  /// The output budget for the next call after a cut answer: doubles the
  /// previous one (8192 at first), at most 32768.
  int64_t grow_max_tokens();

  /// The max_tokens to send now (0 = not sent).
  int64_t max_tokens() const { return max_tokens_; }
  /// Reasoning-only answers seen (for the exit detail).
  int reasoning_only() const { return reasoning_only_; }
  int continuations() const { return continuations_; }
  int call_retries() const { return call_retries_; }

  static constexpr int max_prefills = 2;
  static constexpr int max_retries = 3;
  static constexpr int max_continuations = 3;
  static constexpr int max_call_retries = 4;
  static constexpr int64_t max_output_budget = 32768;

private:
  bool nudged_ = false;
  int prefills_ = 0;
  int retries_ = 0;
  int reasoning_only_ = 0;
  int continuations_ = 0;
  int call_retries_ = 0;
  int64_t max_tokens_ = 0;
};

} // namespace mibyan
