// File: providers/codec_support.hpp
//
// Small helpers shared by the wire-format codecs (`openai_codec`,
// `anthropic_codec`): text trimming and case folding, tolerant member
// reads, and the common opening of whole-response parsing. Pure functions;
// nothing here throws.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "messages/chat.hpp"
#include "base/json.hpp"

namespace mibyan::codec {

/// Returns `s` in ASCII lower case.
std::string lower(std::string_view s);

/// Returns `s` without leading and trailing whitespace.
std::string_view trim(std::string_view s);

/// Returns the number member `key` of `obj` as an integer, or `fallback`
/// when it is missing or not a number.
int64_t int_member(const json::value& obj, std::string_view key,
                   int64_t fallback);

/// Returns whether `text` is valid JSON.
bool valid_json(const std::string& text);

/// Starts parsing a whole (non-streamed) response body received with HTTP
/// `status`: sets `r.http_status`, then fills `r` with an error (HTTP
/// error body, invalid JSON, or a non-object body; the latter two are
/// retryable) and returns false, or stores the parsed object in `obj` and
/// returns true.
bool parse_response_object(int status, std::string_view body,
                           chat_response& r, json::value& obj);

} // namespace mibyan::codec
