// File: serve/openai_messages.hpp
//
// OpenAI chat messages ({"role","content","tool_calls","tool_call_id",
// "name"}), the wire form of a conversation history, converted to
// chat_messages: the edge where a client's message list becomes the typed
// history a turn call carries (turn_call::history). Used by the HTTP
// server's wire formats (serve/openai_chat.hpp, serve/responses.hpp). Pure
// function on json::value; no I/O, no CAF.
#pragma once

#include <string>
#include <vector>

#include "base/json.hpp"
#include "messages/chat.hpp"

namespace mibyan {

/// Converts OpenAI chat messages to chat_messages, appended to `out`.
/// Content may be a string, null or an array of {"type":"text","text"}
/// parts. Returns false and sets `error` on anything else (unknown role,
/// non-text part, bad tool call).
bool chat_messages_from_openai(const json::value& messages,
                               std::vector<chat_message>& out,
                               std::string& error);

} // namespace mibyan
