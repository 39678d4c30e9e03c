// File: tools/html/html_lexing.hpp
//
// The lexical helpers of the HTML-to-text converter
// (tools/html/html_converter.hpp): ASCII character classes,
// character-reference decoding, whitespace collapsing and URL resolution
// against a parsed base (libcurl's URL API).
// Internal to tools/; the public surface is tools/html/html_text.hpp.
//
// Thread-safe (no shared state). Nothing here throws except std::bad_alloc.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "base/strings.hpp"

#include "base/curl_library.hpp"

namespace mibyan::html_detail {

bool is_space(char c);
bool is_alpha(char c);
bool is_alnum(char c);
char to_lower(char c);
bool istarts_with(std::string_view s, std::string_view prefix);

/// Decodes character references in `s`. `nbsp_as_space` maps U+00A0 to a
/// plain space; `in_attr` applies the attribute-value rule (a named
/// reference without ';' followed by '=' or an alphanumeric stays literal).
std::string decode(std::string_view s, bool nbsp_as_space, bool in_attr);

/// Collapses runs of ASCII whitespace to one space and trims both ends.
std::string collapse_spaces(std::string_view s);

struct curlu_deleter {
  void operator()(CURLU* h) const { curl_api().url_cleanup(h); }
};
using curlu_ptr = std::unique_ptr<CURLU, curlu_deleter>;

/// Parses an absolute base URL; null when `base` is empty or unparsable.
curlu_ptr parse_base(std::string_view base);

/// Resolves `ref` (trimmed) against `base`; returns `ref` unchanged when
/// `base` is null or resolution fails.
std::string resolve_with(CURLU* base, std::string_view ref);

} // namespace mibyan::html_detail
