// File: messages/chat.hpp
//
// The conversation data model shared by providers, the agent loop and the
// session store: the public value types of mibyan/turn.hpp (tool_call,
// chat_message, token_usage) with their inspect(), so they cross nodes,
// and the answer of one model call. JSON
// that providers send (tool-call arguments) stays text here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "caf/meta/type_name.hpp"

#include "mibyan/turn.hpp"

namespace mibyan {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, tool_call& x) {
  return f(caf::meta::type_name("mibyan::tool_call"), x.id, x.name,
           x.arguments);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, chat_message& x) {
  return f(caf::meta::type_name("mibyan::chat_message"), x.role, x.content,
           x.tool_calls, x.tool_call_id, x.tool_name, x.reasoning,
           x.finish_reason, x.timestamp_ms);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, token_usage& x) {
  return f(caf::meta::type_name("mibyan::token_usage"), x.input_tokens,
           x.output_tokens, x.cache_read_tokens, x.cache_write_tokens,
           x.reasoning_tokens, x.cost_usd, x.has_cost);
}

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
