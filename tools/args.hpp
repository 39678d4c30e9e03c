// File: tools/args.hpp
//
// Schema-driven argument coercion and validation, applied by the dispatcher
// before any tool runs, so that tools can rely on the declared types.
//
// Supported JSON Schema subset: "type" (string, integer, number, boolean,
// array, object), "required", "enum", "minimum", "maximum", "items.type".
#pragma once

#include <optional>
#include <string>

#include "base/json.hpp"
#include "base/status.hpp"

namespace mibyan {

/// Coerces `args` towards `schema` in place, the way models get it wrong:
/// "42" -> 42, "true" -> true, JSON text -> array/object where one is
/// expected, a bare scalar -> [x] where an array is expected, 4.0 -> 4.
/// Then validates. Fails with invalid_argument and a message naming the
/// offending argument; ok when `args` is valid. Never throws.
status coerce_and_validate(const json::value& schema, json::value& args);

} // namespace mibyan
