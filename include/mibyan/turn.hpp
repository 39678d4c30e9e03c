// File: include/mibyan/turn.hpp  (public API, vocabulary)
//
// The data of a turn as it crosses every boundary of the library: chat
// messages, the provider a turn talks to, the tool events it reports and
// its result. Plain value types: no CAF and no include of the project, so
// every layer (the conversation actor, the runtime, the front ends) and the
// embedding application use the same structs. JSON is rendered from them
// only at the edges (the CLI, the HTTP server, ACP, the MCP server);
// docs/embedding.md, "Turn results", shows the JSON form.
//
// Thread safety: plain values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mibyan {

/// One tool call the model asked for.
struct tool_call {
  /// The provider's call id ("call_abc", "toolu_01..."); generated when the
  /// provider sent none.
  std::string id;
  /// Function name as the model wrote it.
  std::string name;
  /// Arguments as the model wrote them: JSON text, possibly invalid.
  std::string arguments;
};

/// One message of a conversation.
struct chat_message {
  /// system, user, assistant or tool.
  std::string role;
  std::string content;
  /// Assistant messages: the calls it made, in the model's order.
  std::vector<tool_call> tool_calls;
  /// Tool messages: the call this answers, and the tool's name.
  std::string tool_call_id;
  std::string tool_name;
  /// Reasoning text kept apart from the visible content.
  std::string reasoning;
  /// Assistant messages: why generation stopped (stop, tool_calls, length).
  std::string finish_reason;
  /// Milliseconds since the epoch; 0 when unknown.
  int64_t timestamp_ms = 0;
};

/// Token counts of one or more model calls.
struct token_usage {
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  int64_t cache_read_tokens = 0;
  int64_t cache_write_tokens = 0;
  int64_t reasoning_tokens = 0;
  /// What the provider charged for these tokens, in US dollars, when it
  /// says (OpenRouter-style `usage.cost`); `has_cost` is false when no
  /// call counted here reported a cost.
  double cost_usd = 0;
  bool has_cost = false;
};

/// The model connection of a turn. In a request, each "" keeps the
/// configuration's value (`model.provider`, `model.default`,
/// `model.base_url`; an empty `api_key` means the provider's key variable,
/// docs/configuration.md). In a result, the values the turn used; a
/// result's `api_key` is always "".
struct provider_config {
  std::string provider;
  std::string model;
  std::string base_url;
  std::string api_key;
};

/// A tool call as a turn reports it while it runs.
struct tool_event {
  enum class phase : uint8_t {
    /// The call starts: `args_json` is set, `result_json` is "".
    start,
    /// The call ended: `result_json` and `duration_us` are set too.
    end,
  };
  phase what = phase::start;
  /// The call id the model gave.
  std::string call_id;
  /// The tool's name.
  std::string tool;
  /// The arguments as JSON text (as the model wrote them).
  std::string args_json;
  /// The result as JSON text (end only).
  std::string result_json;
  /// Wall-clock time of the call (end only).
  int64_t duration_us = 0;
  /// 0 for the turn's own calls; 1 for a call of a delegate_task child
  /// (shown indented).
  int32_t depth = 0;
  /// The start of a delegate_task call: how many tasks it delegates (0
  /// otherwise).
  int32_t tasks = 0;
};

/// How a turn ended.
enum class turn_exit : uint8_t {
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
  /// Any other failure, or the turn could not start (failed).
  error,
};

/// The result of one user turn: the only result type of the API (the
/// runtime, the agent facade, the actor-level API and the cluster client
/// all answer with it).
struct turn_result {
  /// The turn reached its conversation and ran (possibly failing); false
  /// when it could not start (bad configuration, store unavailable,
  /// shutdown): then `error` says why and only `session_id`,
  /// `config_error` are meaningful.
  bool started = false;
  /// `error` is the configuration's fault (no provider, no key, unknown
  /// toolset, bad working directory): fix it before retrying.
  bool config_error = false;
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
  /// The model gave its answer: final_response set, not failed, and
  /// within the budget (or exit == completed).
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
  /// The detailed exit text ("text_response(finish_reason=stop)",
  /// "max_iterations_reached(90/90)"); empty means the enum's name.
  std::string exit_detail;
  /// What went wrong: why the turn could not start, or why it failed or
  /// ended partially ("" otherwise).
  std::string error;
  /// A failed turn whose cause was transient: the provider stayed
  /// unreachable (connection refused, timeouts, 5xx, 429) after its
  /// retries. The same turn may succeed later.
  bool retryable = false;
  /// The session the turn ran in (a compressed turn: the continuation).
  std::string session_id;
  /// The provider, model and base URL the turn used.
  provider_config provider;
  /// Token counts summed over the turn's provider calls.
  token_usage usage;
  /// Prompt tokens of the last provider call (context fill).
  int64_t last_prompt_tokens = 0;
  /// Failures of cleanup steps that did not discard the answer.
  std::vector<std::string> cleanup_errors;
  /// /steer text that arrived too late to be delivered.
  std::string pending_steer;
  /// Why saving the turn's trajectory failed ("" when saved or not
  /// asked for).
  std::string trajectory_error;
  /// The turn's key was answered before (turn_call::turn_key): this is the
  /// earlier attempt's answer; nothing ran and nothing was stored.
  bool replayed = false;
};

} // namespace mibyan
