// File: tools/registry.hpp
//
// The set of tools a runtime offers, and the CAF-free dispatch of one call:
// look up, parse, coerce, validate, run, contain exceptions.
//
// Thread safety: every member may be called from any thread. The set
// changes at run time (an MCP server's tools/list_changed, docs/mcp.md):
// readers see the set before or after one change, never a mix. A tool
// replaced or removed is retired, not destroyed: the pointers find() and
// all() return stay valid for the registry's lifetime (a call running on
// a tool that was just replaced finishes on it).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "tools/tool.hpp"

namespace mibyan {

class tool_registry {
public:
  tool_registry() = default;
  tool_registry(const tool_registry&) = delete;
  tool_registry& operator=(const tool_registry&) = delete;

  /// Adds `t`; a tool with the same name is replaced.
  void add(std::unique_ptr<tool> t);

  /// One atomic change: removes every tool `drop` selects, then adds
  /// `fresh` (each replacing a tool of the same name).
  void replace(const std::function<bool(const tool&)>& drop,
               std::vector<std::unique_ptr<tool>> fresh);

  /// Returns the tool called `name`, or nullptr.
  const tool* find(std::string_view name) const;

  /// Returns all tools sorted by name.
  std::vector<const tool*> all() const;

  /// Returns the sorted tool names joined by ", ".
  std::string names() const;

  /// Returns the OpenAI function-tool list:
  /// [{"type":"function","function":{"name","description","parameters"}}].
  json::value function_specs() const;

  /// Counts the changes (add, replace) since construction.
  uint64_t generation() const;

  /// Calls `fn` after every later change, on the changing thread, after
  /// the registry's lock is released (it may read the registry). The
  /// changing thread may hold its own locks (mcp_manager re-registers
  /// under its own): `fn` must be quick and must not call back into who
  /// changed the registry - hand longer work to a thread of its own.
  /// Returns an id for unsubscribe. Const: observing is not changing.
  uint64_t subscribe(std::function<void()> fn) const;
  /// Stops the calls of `id`; returns after a call running on another
  /// thread has finished (never call it from inside `fn`).
  void unsubscribe(uint64_t id) const;

private:
  void add_locked(std::unique_ptr<tool> t);
  void changed();

  struct observers {
    std::mutex mtx; // held while calling: unsubscribe waits for a call
    uint64_t next = 1;
    std::vector<std::pair<uint64_t, std::function<void()>>> list;
  };
  mutable observers observers_;
  std::atomic<uint64_t> generation_{0};
  mutable std::shared_mutex mtx_;
  std::vector<std::unique_ptr<tool>> tools_;
  std::vector<std::unique_ptr<tool>> retired_; // see the file comment
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
