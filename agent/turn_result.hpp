// File: agent/turn_result.hpp
//
// The outcome of one user turn of the agent loop (docs/agent_loop.md, "Turn result"): the
// answer, the transcript, how the turn ended and what it cost. Built by the
// turn and handed to the session, the CLI (`mibyan run --json`) and
// gateways.
//
// Thread safety: a plain value type.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "messages/chat.hpp"
#include "base/json.hpp"

namespace mibyan {

/// How a turn ended.
enum class turn_exit {
  /// The model gave a final answer ("text_response(finish_reason=...)").
  completed,
  /// The user interrupted the turn.
  interrupted_by_user,
  /// The iteration budget refused another provider call.
  budget_exhausted,
  /// The budget-exhausted summary ran ("max_iterations_reached(u/m)").
  max_iterations_reached,
  /// A tool-loop guardrail halted the turn.
  guardrail_halt,
  /// The model kept answering with nothing visible.
  empty_response_exhausted,
  /// Too many consecutive rounds of invalid tool calls (partial).
  invalid_tool_calls,
  /// The output limit cut the response off too often (partial).
  truncated,
  /// The provider kept failing after retries (failed).
  provider_error,
  /// Any other failure (failed).
  error,
};

/// Returns the snake_case name of `x`, e.g. "interrupted_by_user".
const char* to_string(turn_exit x);

/// Parses a name produced by `to_string`. Returns false for anything else.
bool from_string(std::string_view name, turn_exit& x);

/// Returns "text_response(finish_reason=<fr>)" (fr "unknown" when empty).
std::string text_response_reason(std::string_view finish_reason);

/// Returns "max_iterations_reached(<used>/<max>)".
std::string max_iterations_reason(int64_t used, int64_t max);

/// The result of one turn.
struct turn_result {
  /// The answer shown to the user; nullopt when the turn produced none.
  std::optional<std::string> final_response;
  /// Reasoning text of the last assistant message, if any.
  std::optional<std::string> last_reasoning;
  /// The whole conversation after the turn (history + this turn).
  std::vector<chat_message> messages;
  /// Provider calls made in this turn.
  int64_t api_calls = 0;
  /// The iteration cap of the turn (`agent.max_turns`).
  int64_t max_iterations = 0;
  /// See `compute_completed`.
  bool completed = false;
  /// The turn failed (provider error, internal error).
  bool failed = false;
  /// The turn ended early with partial work (invalid calls, truncation).
  bool partial = false;
  /// The user interrupted the turn.
  bool interrupted = false;
  /// The message that came with the interrupt, if any.
  std::string interrupt_message;
  /// How the turn ended.
  turn_exit exit = turn_exit::completed;
  /// The spec's detailed exit text ("text_response(finish_reason=stop)",
  /// "max_iterations_reached(90/90)"); empty means `to_string(exit)`.
  std::string exit_detail;
  /// What went wrong, for failed and partial turns.
  std::string error;
  /// A failed turn whose cause was transient: the provider stayed
  /// unreachable (connection refused, timeouts, 5xx, 429) after its
  /// retries. The same turn may succeed later (scheduled jobs retry it,
  /// docs/cron.md).
  bool retryable = false;
  std::string session_id;
  std::string model;
  std::string provider;
  std::string base_url;
  /// Token counts summed over the turn's provider calls.
  token_usage usage;
  /// Prompt tokens of the last provider call (context fill).
  int64_t last_prompt_tokens = 0;
  /// Failures of cleanup steps that did not discard the answer.
  std::vector<std::string> cleanup_errors;
  /// /steer text that arrived too late to be delivered.
  std::string pending_steer;
  /// The turn's key was answered before (turn_call::turn_key): this is the
  /// earlier attempt's answer; nothing ran and nothing was stored.
  bool replayed = false;

  /// Returns `final_response && !failed && (api_calls < max_iterations ||
  /// exit == completed)`.
  bool compute_completed() const;

  /// Returns `exit_detail`, or `to_string(exit)` when it is empty.
  std::string turn_exit_reason() const;

  /// Returns the result as JSON (the §13 shape, always complete):
  /// final_response, last_reasoning, messages (OpenAI chat format plus
  /// "reasoning"/"finish_reason"), api_calls, completed, turn_exit_reason,
  /// exit_reason (the enum name), failed, partial, interrupted, model,
  /// provider, base_url, the token counts (prompt_tokens = input + cache
  /// read + cache write, completion_tokens = output, total_tokens = both),
  /// last_prompt_tokens, session_id, error; and, only when set,
  /// interrupt_message, cleanup_errors, pending_steer, retryable,
  /// replayed.
  json::value to_json() const;
};

/// Returns one message in the OpenAI chat format used by `to_json`:
/// {"role","content"} plus "tool_calls" ([{"id","type":"function",
/// "function":{"name","arguments"}}]), "tool_call_id" and "name" (tool
/// messages), "reasoning", "finish_reason", "timestamp_ms" when set.
json::value turn_message_json(const chat_message& m);

} // namespace mibyan
