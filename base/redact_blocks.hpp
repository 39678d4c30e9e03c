// File: base/redact_blocks.hpp
//
// Internal to the secret redactor (base/redact.cpp): secrets that span a
// block rather than one token.
//
//   * PEM private keys: "-----BEGIN <label> PRIVATE KEY-----" anywhere
//     (also inside a bytes repr or a JSON string, where the line breaks
//     are the two characters "\n"); the body up to "-----END", or, when
//     the output was cut, as far as it looks like PEM (base64, header
//     lines, real or escaped line breaks). An "-----END ... PRIVATE
//     KEY-----" whose BEGIN was cut off (head/tail truncation) takes the
//     base64 lines in front of it.
//   * .netrc entries: the value after `password` on a line that starts
//     with `machine` or `default`, or on a `login`/`password`/`account`
//     line that follows such a line.
//
// Pure functions over the text being scanned; thread-safe.
#pragma once

#include <cstddef>
#include <string_view>

namespace mibyan::redact_detail {

/// A span [begin, end) to replace, found at a position of the text.
struct block_span {
  size_t begin = 0;
  size_t end = 0;
};

/// At `i` (which starts "-----BEGIN "): the body of a private-key block
/// (possibly empty); false when there is none or it is already redacted.
bool pem_begin_block(std::string_view s, size_t i, block_span& out);

/// At `i` (which starts "-----END "): the body in front of an END line of a
/// private key whose BEGIN line is not in the text (at least 16 base64
/// characters).
bool pem_orphan_end(std::string_view s, size_t i, block_span& out);

/// At `i` (which starts the word "password" at a token boundary): the
/// value of a .netrc `password` token.
bool netrc_password(std::string_view s, size_t i, block_span& out);

/// Whether `c` belongs to the base64 alphabet (standard or URL-safe,
/// without the '=' padding).
constexpr bool is_b64(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
         || (c >= '0' && c <= '9') || c == '+' || c == '/' || c == '-'
         || c == '_';
}

} // namespace mibyan::redact_detail
