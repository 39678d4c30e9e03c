// File: messages/turn_request.hpp
//
// One user turn for a conversation actor (actors/conversation.hpp). Plain
// data with inspect(); the actor handles serialise as handles.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "caf/actor.hpp"
#include "caf/meta/type_name.hpp"

#include "messages/turn_result.hpp"

namespace mibyan {

struct turn_request {
  /// The user's message.
  std::string text;
  /// Iteration cap of this turn; <= 0 means `agent.max_turns`.
  int64_t max_iterations = 0;
  /// Toolsets offered to the model (empty = every tool).
  std::vector<std::string> toolsets;
  /// Ask the provider for a stream.
  bool stream = true;
  /// Receives (delta_atom, std::string session_id, std::string kind,
  /// std::string text) for streamed fragments and (tool_event_atom,
  /// std::string session_id, tool_event) for tool activity while the turn
  /// runs; may be invalid.
  caf::actor sink;
  /// The provider connection (a provider_actor) for this turn.
  caf::actor provider;
  /// The provider, model and base URL the connection uses, reported in
  /// the turn result (`api_key` stays "": the connection holds the key).
  provider_config endpoint;
  /// Tools never offered this turn, by name (a delegate_task child's
  /// restricted set, docs/tools.md).
  std::vector<std::string> blocked_tools;
  /// The turn's idempotency key ("" = none; turn_call::turn_key): a turn
  /// whose key the session already holds is not stored or run twice.
  std::string turn_key;
};

/// Longest turn key (bytes).
constexpr size_t max_turn_key_bytes = 200;

/// Whether `key` is a usable turn key: "" (none), or 1..200 bytes of
/// printable ASCII without spaces (it is stored as the user message's
/// idempotency key "turn:<key>", storage/session_store.hpp).
inline bool valid_turn_key(std::string_view key) {
  if (key.size() > max_turn_key_bytes)
    return false;
  for (char c : key)
    if (c < 0x21 || c > 0x7e)
      return false;
  return true;
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, turn_request& x) {
  return f(caf::meta::type_name("mibyan::turn_request"), x.text,
           x.max_iterations, x.toolsets, x.stream, x.sink, x.provider,
           x.endpoint, x.blocked_tools, x.turn_key);
}

} // namespace mibyan
