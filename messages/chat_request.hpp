// File: messages/chat_request.hpp
//
// One model call for a provider connection actor (actors/provider.hpp).
// Plain data with inspect(), so it crosses nodes; `sink` is an actor handle
// and serialises as one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "caf/actor.hpp"
#include "caf/meta/type_name.hpp"

#include "messages/chat.hpp"

namespace mibyan {

/// A Chat Completions style request, independent of the wire format.
struct chat_request {
  /// Caller-chosen id, unique among the caller's requests in flight on one
  /// connection; names the request in deltas and in `cancel_atom`.
  std::string request_id;
  /// Model id; "" means the connection's default model.
  std::string model;
  /// The conversation, OpenAI-shaped (system, user, assistant, tool).
  std::vector<chat_message> messages;
  /// Tools as JSON text: an array of {name, description, parameters} or
  /// of {"type": "function", "function": {...}} objects. "" = no tools.
  std::string tools_json;
  /// Ask for an SSE stream (preferred: enables stale-stream detection).
  bool stream = true;
  /// Output token limit; 0 = not sent (Anthropic: the model's ceiling).
  int64_t max_tokens = 0;
  /// "" or low, medium, high, xhigh (where the provider supports it).
  std::string reasoning_effort;
  /// Receives streamed fragments as
  ///   (delta_atom, std::string request_id, std::string kind,
  ///    std::string text)
  /// with kind "text", "reasoning", or "restart" (a retry or fallback
  /// starts over: discard the fragments received so far; text = reason).
  /// May be invalid (no deltas are sent).
  caf::actor sink;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, chat_request& x) {
  return f(caf::meta::type_name("mibyan::chat_request"), x.request_id,
           x.model, x.messages, x.tools_json, x.stream, x.max_tokens,
           x.reasoning_effort, x.sink);
}

} // namespace mibyan
