// File: tools/registry.hpp
//
// The set of tools a runtime offers, and the CAF-free dispatch of one call:
// look up, parse, coerce, validate, run, contain exceptions.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tools/tool.hpp"

namespace mibyan {

class tool_registry {
public:
  /// Adds `t`; a tool with the same name is replaced.
  void add(std::unique_ptr<tool> t);

  /// Returns the tool called `name`, or nullptr.
  const tool* find(std::string_view name) const;

  /// Returns all tools sorted by name.
  std::vector<const tool*> all() const;

  /// Returns the sorted tool names joined by ", ".
  std::string names() const;

  /// Returns the OpenAI function-tool list:
  /// [{"type":"function","function":{"name","description","parameters"}}].
  json::value function_specs() const;

private:
  std::vector<std::unique_ptr<tool>> tools_;
};

/// Registers the core tools: read_file, write_file, patch, search_files,
/// terminal, web_extract, web_search, process.
void register_core_tools(tool_registry& reg);

/// Runs one tool call synchronously on the calling thread. Never throws.
///
/// Errors come back as result objects, never as exceptions:
/// - unknown tool: {"error": "Unknown tool: X. Available tools: ..."}
/// - args not JSON / not an object: {"error": "Invalid tool arguments",
///   "message": "..."}
/// - schema violation: {"error": "<which argument and why>"}
/// - exception from the tool: {"error": "[TOOL_ERROR] Tool execution failed:
///   <what>"}
json::value dispatch_tool(const tool_registry& reg, std::string_view name,
                          std::string_view args_json, const tool_context& ctx);

/// Like dispatch_tool, for arguments that are already parsed.
json::value dispatch_tool(const tool_registry& reg, std::string_view name,
                          json::value args, const tool_context& ctx);

} // namespace mibyan
