// File: serve/openai_chat.hpp
//
// The OpenAI Chat Completions wire format as `mibyan serve` speaks it
// (docs/serve.md): request parsing, the conversion of a client's message
// list into a prompt plus history, and the response, chunk and error
// bodies. The message conversion itself (chat_messages_from_openai) is the
// providers layer's (serve/openai_messages.hpp). Pure functions on text
// and json::value; no I/O.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/json.hpp"
#include "base/status.hpp"
#include "messages/chat.hpp"
#include "serve/openai_messages.hpp"

namespace mibyan {

/// A parsed POST /v1/chat/completions body.
struct chat_completion_request {
  std::string model;
  bool stream = false;
  /// stream_options.include_usage: a last chunk with `usage`.
  bool include_usage = false;
  /// The last message (role user): the turn's prompt. The text of the
  /// client's system messages is put in front of the first user message.
  std::string prompt;
  /// The messages before the last one (no system messages), the form of
  /// turn_call::history.
  std::vector<chat_message> history;
};

/// Parses `body`, a request of at most `max_messages` messages. Errors
/// (the message is for the client): resource_exhausted when `messages` has
/// more elements than `max_messages`, found before any message is built or
/// converted; invalid_argument for anything else (malformed JSON, no
/// `messages`, last message not from the user, ...).
status parse_chat_completion(std::string_view body,
                             chat_completion_request& out,
                             size_t max_messages);

/// `messages` as the history of a turn call (turn_call::history): what the
/// OpenAI chat format carries of each (role, content, tool calls, and a
/// tool message's call id and name); system messages are left out.
std::vector<chat_message> history_of(std::vector<chat_message> messages);

/// Token counts as reported in `usage`.
struct completion_usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t total_tokens = 0;
  /// Of prompt_tokens, read from the provider's cache; of
  /// completion_tokens, reasoning (the Responses API reports both).
  int64_t cached_tokens = 0;
  int64_t reasoning_tokens = 0;
};

/// {"id","object":"chat.completion","created","model","choices":[{"index":0,
/// "message":{"role":"assistant","content"},"finish_reason"}],"usage",
/// "mibyan":{...}} (`extension` omitted when null).
std::string completion_body(const std::string& id, int64_t created,
                            const std::string& model,
                            const std::string& content,
                            const std::string& finish_reason,
                            const completion_usage& usage,
                            const json::value& extension);

/// One SSE event "data: {chat.completion.chunk}\n\n". `delta` is the
/// choice's delta object; `finish_reason` "" gives null; `extension`
/// (null to omit) becomes the top-level "mibyan" field; `usage` non-null
/// gives a usage chunk with an empty `choices` array.
std::string chunk_event(const std::string& id, int64_t created,
                        const std::string& model, const json::value& delta,
                        const std::string& finish_reason,
                        const json::value& extension,
                        const completion_usage* usage = nullptr);

/// {"error":{"message","type","code"}}; `code` "" gives null.
std::string error_body(const std::string& message, const std::string& type,
                       const std::string& code);

} // namespace mibyan
