// File: messages/chat.hpp
//
// The conversation data model shared by providers, the agent loop and the
// session store. Plain structs with inspect(), so they cross nodes. JSON
// that providers send (tool-call arguments) stays text here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "caf/meta/type_name.hpp"

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

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, tool_call& x) {
  return f(caf::meta::type_name("mibyan::tool_call"), x.id, x.name,
           x.arguments);
}

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

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, chat_message& x) {
  return f(caf::meta::type_name("mibyan::chat_message"), x.role, x.content,
           x.tool_calls, x.tool_call_id, x.tool_name, x.reasoning,
           x.finish_reason, x.timestamp_ms);
}

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

/// Adds `b`'s counts and cost into `a`.
inline void add_token_usage(token_usage& a, const token_usage& b) {
  a.input_tokens += b.input_tokens;
  a.output_tokens += b.output_tokens;
  a.cache_read_tokens += b.cache_read_tokens;
  a.cache_write_tokens += b.cache_write_tokens;
  a.reasoning_tokens += b.reasoning_tokens;
  if (b.has_cost) {
    a.cost_usd += b.cost_usd;
    a.has_cost = true;
  }
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, token_usage& x) {
  return f(caf::meta::type_name("mibyan::token_usage"), x.input_tokens,
           x.output_tokens, x.cache_read_tokens, x.cache_write_tokens,
           x.reasoning_tokens, x.cost_usd, x.has_cost);
}

/// What one model call produced: an answer, tool calls, or an error.
struct chat_response {
  std::string content;
  std::string reasoning;
  std::vector<tool_call> tool_calls;
  /// stop, tool_calls, length, content_filter, ... ("" when unknown).
  std::string finish_reason;
  token_usage usage;
  /// The model the provider says answered.
  std::string model;
  /// Non-empty when the call failed: a message naming the provider's error.
  std::string error;
  /// HTTP status of the response (0 when no response arrived).
  int32_t http_status = 0;
  /// Whether retrying the same request may succeed (429, 5xx, transport).
  bool retryable = false;
  /// The provider connection that produced this response ("openai",
  /// "anthropic", ...; "" when not set by a provider actor).
  std::string provider;
  /// HTTP attempts the provider actor made for this call (all providers).
  int32_t attempts = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, chat_response& x) {
  return f(caf::meta::type_name("mibyan::chat_response"), x.content,
           x.reasoning, x.tool_calls, x.finish_reason, x.usage, x.model,
           x.error, x.http_status, x.retryable, x.provider, x.attempts);
}

} // namespace mibyan
