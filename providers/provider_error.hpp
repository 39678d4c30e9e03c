// File: providers/provider_error.hpp
//
// Turning provider error payloads into `chat_response` errors: the message a
// model or user can act on, and whether retrying may help (docs/providers.md, "Retries").
// Shared by the OpenAI-compatible and Anthropic codecs.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "messages/chat.hpp"
#include "base/json.hpp"

namespace mibyan {

/// Returns whether a response with this HTTP status may succeed when
/// retried: 408, 429 and every 5xx (including 529). Other statuses no.
bool retryable_status(int status);

/// Returns whether `status` is a success status (2xx).
inline bool success_status(int status) {
  return status >= 200 && status < 300;
}

/// Returns a one-line description of a provider error object such as
/// {"message": ..., "type": ..., "code": ...} (OpenAI, OpenRouter, Groq,
/// llama.cpp) or {"type": ..., "message": ...} (Anthropic), e.g.
/// "model: bad model [not_found_error]". Strings are returned as is; other
/// shapes are dumped.
std::string describe_error(const json::value& error);

/// Returns whether an in-body error object names a transient failure: a
/// `code`/`status_code` of 408, 429 or 5xx, or a type such as server_error,
/// overloaded_error, rate_limit_error, api_error or timeout_error.
bool retryable_error(const json::value& error);

/// Returns the error object or message carried by a parsed body, if any:
/// `error` (object or string) of an object body, or nullptr.
const json::value* find_error(const json::value& body);

/// Fills `resp` for a failed HTTP exchange: `http_status`, `retryable`
/// (by status) and `error` = "HTTP <status>: <provider message>". The
/// message comes from the JSON error body in the shapes providers use, or
/// from the start of a non-JSON body.
void set_http_error(chat_response& resp, int status, std::string_view body);

/// Returns the first `max` bytes of `text` as valid single-line UTF-8, for
/// quoting bodies in error messages.
std::string error_snippet(std::string_view text, size_t max = 300);

} // namespace mibyan
