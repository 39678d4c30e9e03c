// File: providers/tool_schema.hpp
//
// Normalising the tool list a caller passes to a request builder. Callers
// may pass bare `{name, description, parameters}` objects (or
// `input_schema` instead of `parameters`) or OpenAI-wrapped
// `{"type": "function", "function": {...}}` objects; each codec then writes
// its own wire shape.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "base/json.hpp"

namespace mibyan {

/// One tool as both wire formats need it.
struct tool_schema {
  std::string name;
  /// Empty when the tool has none.
  std::string description;
  /// A JSON Schema object; `{"type":"object","properties":{}}` when the tool
  /// declared none (or an empty/non-object one).
  json::value parameters;
};

/// Returns the tools of `tools` (a JSON array; anything else yields none)
/// sorted by name for prompt-cache stability. Entries without a name, that
/// are not objects, or whose name repeats an earlier one are dropped.
std::vector<tool_schema> normalize_tools(const json::value& tools);

} // namespace mibyan
