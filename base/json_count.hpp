// File: base/json_count.hpp
//
// Size checks on JSON text before it is parsed into a json::value (which
// builds every element: a request of 100k small objects costs tens of times
// its size). Pure functions; simdjson's on-demand parser inside.
#pragma once

#include <cstdint>
#include <string_view>

namespace mibyan::json {

/// The number of elements of the array member `key` of the top-level
/// object of `text`, counted without materialising them. -1 when `text` is
/// not an object, is malformed up to that member, or has no array named
/// `key`.
int64_t array_member_size(std::string_view text, std::string_view key);

} // namespace mibyan::json
