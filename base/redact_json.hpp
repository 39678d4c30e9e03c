// File: base/redact_json.hpp
//
// Applies the secret redactor (base/redact.hpp) to every string inside a
// JSON value: object member values and array elements, recursively; member
// names are left alone (docs/security.md, "Secret redaction"). Pure;
// thread-safe for distinct values.
#pragma once

#include "base/json.hpp"

namespace mibyan {

class redactor;

/// Redacts every string in `v` in place; returns whether anything changed.
bool redact_json_strings(json::value& v, const redactor& r);

} // namespace mibyan
