// File: tools/redact_result.hpp
//
// Applies the secret redactor (base/redact.hpp) to tool results: every
// string inside a JSON value (object member values and array elements,
// recursively; member names are left alone). dispatch_tool calls this on
// every result, so it is the one choke point between a tool and the model
// (docs/security.md). Pure; thread-safe.
#pragma once

#include <string>

#include "base/json.hpp"
#include "base/redact_json.hpp"
#include "tools/tool.hpp"

namespace mibyan {

class redactor;

/// The redactor a call should use: ctx.redact, or process_redactor().
const redactor& context_redactor(const tool_context& ctx);

/// Returns `text` redacted with context_redactor(ctx).
std::string redact_text(const tool_context& ctx, std::string text);

} // namespace mibyan
