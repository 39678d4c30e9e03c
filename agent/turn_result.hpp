// File: agent/turn_result.hpp
//
// Helpers of the outcome of one user turn (docs/agent_loop.md, "Turn
// result"): the struct itself is the public mibyan::turn_result
// (mibyan/turn.hpp), built by the conversation and handed as a value to the
// runtime, the facade and the front ends; here are its exit names, its
// completion rule and its one JSON rendering, which only the edges call.
//
// Thread safety: a plain value type.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "messages/chat.hpp"
#include "mibyan/turn.hpp"
#include "base/json.hpp"

namespace mibyan {

/// Returns the snake_case name of `x`, e.g. "interrupted_by_user".
const char* to_string(turn_exit x);

/// Parses a name produced by `to_string`. Returns false for anything else.
bool from_string(std::string_view name, turn_exit& x);

/// Returns "text_response(finish_reason=<fr>)" (fr "unknown" when empty).
std::string text_response_reason(std::string_view finish_reason);

/// Returns "max_iterations_reached(<used>/<max>)".
std::string max_iterations_reason(int64_t used, int64_t max);

/// Returns `r.final_response && !r.failed && (r.api_calls <
/// r.max_iterations || r.exit == completed)`.
bool compute_completed(const turn_result& r);

/// Returns `r.exit_detail`, or `to_string(r.exit)` when it is empty.
std::string turn_exit_reason(const turn_result& r);

/// Returns the result as JSON (the §13 shape, always complete), the one
/// rendering the edges (CLI, HTTP server, trajectories) use:
/// final_response, last_reasoning, messages (OpenAI chat format plus
/// "reasoning"/"finish_reason"), api_calls, completed, turn_exit_reason,
/// exit_reason (the enum name), failed, partial, interrupted, model,
/// provider, base_url, the token counts (prompt_tokens = input + cache
/// read + cache write, completion_tokens = output, total_tokens = both),
/// last_prompt_tokens, session_id, error; and, only when set,
/// interrupt_message, cleanup_errors, pending_steer, retryable,
/// replayed. (`started`,
/// `config_error` and `trajectory_error` are not part of it: the edges
/// report a turn that did not start as an error of their own.)
json::value turn_result_json(const turn_result& r);

/// Returns the event as the JSON object the edges show: a start
/// {"arguments", "tasks" (delegate_task only), "id", "name"}, an end
/// {"result", "duration_us", "id", "name"}, each with "depth" when > 0.
json::value tool_event_json(const tool_event& ev);

/// Returns "tool_start" or "tool_end".
const char* tool_event_kind(const tool_event& ev);

/// Returns one message in the OpenAI chat format used by `to_json`:
/// {"role","content"} plus "tool_calls" ([{"id","type":"function",
/// "function":{"name","arguments"}}]), "tool_call_id" and "name" (tool
/// messages), "reasoning", "finish_reason", "timestamp_ms" when set.
json::value turn_message_json(const chat_message& m);

} // namespace mibyan
