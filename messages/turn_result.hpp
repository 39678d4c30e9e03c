// File: messages/turn_result.hpp
//
// inspect() for the public turn types of mibyan/turn.hpp that travel in
// messages: a conversation answers a turn with a turn_result, reports tool
// activity as tool_event, and a cluster gateway sends both to a client.
// The structs themselves are public (CAF-free); only their inspection
// lives here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "caf/meta/load_callback.hpp"
#include "caf/meta/type_name.hpp"
#include "caf/none.hpp"

#include "messages/chat.hpp"
#include "mibyan/turn.hpp"

namespace mibyan {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, provider_config& x) {
  return f(caf::meta::type_name("mibyan::provider_config"), x.provider,
           x.model, x.base_url, x.api_key);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, tool_event& x) {
  // Enums travel as their number (CAF 0.17 cannot print an enum).
  auto what = static_cast<uint8_t>(x.what);
  auto restore = caf::meta::load_callback([&]() -> caf::error {
    x.what = static_cast<tool_event::phase>(what);
    return caf::none;
  });
  return f(caf::meta::type_name("mibyan::tool_event"), what, restore,
           x.call_id, x.tool, x.args_json, x.result_json, x.duration_us,
           x.depth, x.tasks);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, turn_result& x) {
  // std::optional has no inspect() in CAF 0.17: each optional string goes
  // as a presence flag and the text, and the exit as its number, restored
  // after loading.
  bool has_final = x.final_response.has_value();
  std::string final_text = has_final ? *x.final_response : std::string{};
  bool has_reasoning = x.last_reasoning.has_value();
  std::string reasoning = has_reasoning ? *x.last_reasoning : std::string{};
  auto exit = static_cast<uint8_t>(x.exit);
  auto restore = caf::meta::load_callback([&]() -> caf::error {
    x.exit = static_cast<turn_exit>(exit);
    x.final_response = has_final ? std::optional<std::string>{final_text}
                                 : std::nullopt;
    x.last_reasoning = has_reasoning ? std::optional<std::string>{reasoning}
                                     : std::nullopt;
    return caf::none;
  });
  return f(caf::meta::type_name("mibyan::turn_result"), x.started,
           x.config_error, has_final, final_text, has_reasoning, reasoning,
           x.messages, x.api_calls, x.max_iterations, x.completed,
           x.failed, x.partial, x.interrupted, x.interrupt_message, exit,
           x.exit_detail, x.error, x.retryable, x.session_id, x.provider,
           x.usage, x.last_prompt_tokens, x.cleanup_errors, x.pending_steer,
           x.trajectory_error, x.replayed, restore);
}

} // namespace mibyan
