// File: providers/tool_call_id.hpp
//
// Tool-call ids on the wire: deterministic ids for calls a provider sent
// without one, and the id sanitiser for endpoints with a strict id alphabet.
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace mibyan {

/// Returns the lowercase hex SHA-256 digest of `bytes`.
std::string sha256_hex(std::string_view bytes);

/// Returns the id for a call that arrived without one:
/// "call_" + the first 12 hex digits of SHA-256("name:arguments:index").
/// The same call always gets the same id, which keeps prompt caches stable.
std::string make_tool_call_id(std::string_view name,
                              std::string_view arguments, size_t index);

/// Returns `id` with every character outside [A-Za-z0-9_-] replaced by '_',
/// or "tool_<index>" when `id` is empty (Anthropic's tool_use id rule).
std::string sanitize_tool_call_id(std::string_view id, size_t index);

} // namespace mibyan
