// File: base/utf8.hpp
//
// The two small pieces every escape decoder needs: the value of a hex digit
// and the UTF-8 encoding of a code point. Used by the shell-escape decoder
// (approvals), JSON string decoding (providers) and HTML character
// references (tools/html). Pure functions; any thread.
#pragma once

#include <cstdint>
#include <string>

namespace mibyan {

/// 0..15 for [0-9a-fA-F], -1 for anything else.
int hex_digit_value(char c);

/// Appends the UTF-8 form of `cp`; a surrogate or a value above U+10FFFF
/// (no character) is written as U+FFFD.
void append_utf8(std::string& out, uint32_t cp);

} // namespace mibyan
