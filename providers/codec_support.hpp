// File: providers/codec_support.hpp
//
// Small helpers shared by the wire-format codecs (`openai_codec`,
// `anthropic_codec`): tolerant member reads and the common opening of
// whole-response parsing. Pure functions; nothing here throws.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "messages/chat.hpp"
#include "base/json.hpp"

namespace mibyan::codec {

/// Returns the number member `key` of `obj` as an integer, or `fallback`
/// when it is missing or not a number.
int64_t int_member(const json::value& obj, std::string_view key,
                   int64_t fallback);

/// Returns whether `text` is valid JSON.
bool valid_json(const std::string& text);

/// Starts parsing a whole (non-streamed) response body received with HTTP
/// `status`: sets `r.http_status`, then fills `r` with an error (HTTP
/// error body; invalid JSON even after `repair_json_text`, not retryable
/// because the body arrived complete; a non-object body, retryable) and
/// returns false, or stores the parsed object in `obj` and returns true.
bool parse_response_object(int status, std::string_view body,
                           chat_response& r, json::value& obj);

/// Returns `text` with what no JSON parser accepts but a provider may send
/// replaced by U+FFFD: invalid UTF-8 bytes, and `\uD800`-`\uDFFF` escapes
/// that are not a high surrogate followed by a low one. Everything else is
/// left byte for byte.
std::string repair_json_text(std::string_view text);

/// Parses JSON text from a provider. Text that does not parse is repaired
/// with `repair_json_text` and parsed once more, so a lone surrogate or a
/// stray byte in a model's output costs one replacement character, not
/// the turn (docs/security.md).
json::parse_result parse_provider_json(std::string_view text);

} // namespace mibyan::codec
