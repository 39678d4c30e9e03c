// File: base/redact_names.hpp
//
// Internal to the secret redactor (base/redact.cpp): character classes
// and the name and value heuristics of its pair rule (which `NAME=value`
// pairs hold secrets, which values are placeholders). The rules are
// described in docs/security.md. Pure functions; thread-safe.
#pragma once

#include <string_view>

namespace mibyan::redact_detail {

constexpr bool is_alpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
constexpr bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
constexpr bool is_alnum(char c) {
  return is_alpha(c) || is_digit(c);
}
constexpr bool is_upper(char c) {
  return c >= 'A' && c <= 'Z';
}
constexpr bool is_lower(char c) {
  return c >= 'a' && c <= 'z';
}
/// Characters of a key body: [A-Za-z0-9_-].
constexpr bool is_tok(char c) {
  return is_alnum(c) || c == '_' || c == '-';
}
constexpr bool is_space(char c) {
  return c == ' ' || c == '\t';
}
constexpr char lower(char c) {
  return is_upper(c) ? static_cast<char>(c - 'A' + 'a') : c;
}

/// Whether a pair called `name` (e.g. OPENAI_API_KEY, apiKey,
/// client_secret) holds a secret: decided by its last word.
bool is_secret_pair_name(std::string_view name);

/// Whether `c` can be the last byte of a name that is_secret_pair_name
/// accepts (the last letters of its word endings, in either case).
constexpr bool may_end_secret_pair_name(char c) {
  switch (lower(c)) {
    case 'n': case 't': case 'd': case 'e': case 'y': case 's': case 'h':
    case 'l':
      return true;
    default:
      return false;
  }
}

/// Whether a pair value is a placeholder rather than a secret ($VAR, <x>,
/// ***, null, short numbers, fewer than 4 characters, ...).
bool is_placeholder_value(std::string_view v);

/// Whether an unquoted value names something in code (self.token,
/// os.environ, string) instead of holding a secret.
bool is_reference_like(std::string_view v);

} // namespace mibyan::redact_detail
