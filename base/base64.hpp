// File: base/base64.hpp
//
// Base64 decoding for data that arrives encoded from outside (ripgrep's
// JSON for non-UTF-8 text, MCP image and blob content).
//
// Thread-safe (no state). Never fails: see the function's contract.
#pragma once

#include <string>
#include <string_view>

namespace mibyan {

/// Decodes base64 in the standard alphabet or the URL-safe one ('-' and
/// '_' for '+' and '/'). Characters of neither alphabet (padding, line
/// breaks, garbage) are skipped, and trailing bits that do not make a
/// whole byte are dropped, so any input gives some output.
std::string base64_decode(std::string_view in);

/// Encodes `in` in the standard alphabet with padding (RFC 4648 §4), e.g.
/// for HTTP Basic credentials.
std::string base64_encode(std::string_view in);

} // namespace mibyan
