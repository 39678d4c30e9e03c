// File: base/redact_shapes.hpp
//
// Internal to the secret redactor (base/redact.cpp): the rules that match
// at the start of a token, each with a literal prefix (the shapes listed
// in base/redact.hpp): provider and service keys (sk-..., ghp_..., AKIA...),
// JWTs and `Bearer <token>`. Pure functions; thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mibyan::redact_detail {

/// A span of the scanned text to replace.
struct match {
  size_t begin = 0;  // replaced range [begin, end)
  size_t end = 0;
  std::string replacement;
};

/// Sets `bit` in `flags` for the first byte of every key prefix.
void mark_shape_first_bytes(std::array<uint8_t, 256>& flags, uint8_t bit);

/// The literal prefixes of the key shapes (prefixed_key matches only at a
/// position that starts one of them).
std::vector<std::string_view> key_prefixes();

/// A provider or service key at `i` -> "<prefix>[REDACTED]".
bool prefixed_key(std::string_view s, size_t i, match& m);

/// A JWT (eyJ<header>.<payload>.<signature>) at `i` -> "[REDACTED]".
bool jwt(std::string_view s, size_t i, match& m);

/// `Bearer <token>` at `i`: the token -> "[REDACTED]".
bool bearer(std::string_view s, size_t i, match& m);

} // namespace mibyan::redact_detail
