// File: tools/mcp/mcp_catalog.hpp
//
// The pure rules of turning an MCP server's catalog into registry tools and
// its replies into tool results (docs/mcp.md): name sanitising and
// prefixing, include/exclude filters, input-schema normalisation, the
// result shapes, and the per-server circuit breaker. No I/O except
// `mcp_result_to_tool_result` saving images/audio under a directory.
//
// Thread safety: pure functions; `mcp_breaker` is not synchronised (its
// owner locks).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "base/json.hpp"
#include "config/mcp_options.hpp"

namespace mibyan {

/// Longest registered tool name (OpenAI-compatible providers refuse more).
constexpr size_t mcp_max_tool_name = 64;

/// Every character outside [A-Za-z0-9_] becomes '_'.
std::string mcp_sanitize(std::string_view component);

/// "mcp__<server>__<tool>" with both components sanitised.
std::string mcp_tool_name(std::string_view server, std::string_view tool);

/// "mcp-<server>": the dynamic toolset of a server.
std::string mcp_toolset_name(std::string_view server);

/// Whether the raw tool `name` passes `s.include` / `s.exclude`: a
/// non-empty include list admits only matching names (it wins over
/// exclude); else a non-empty exclude list drops matching names; else
/// everything passes. Entries are exact names or case-sensitive shell
/// globs (`get_*`).
bool mcp_tool_admitted(const mcp_server_options& s, std::string_view name);

/// The parameters schema a registry tool gets from an MCP `inputSchema`
/// (null when absent): a missing or non-object schema becomes
/// {"type":"object","properties":{}}; `required` entries naming absent
/// properties are dropped; `$schema` is removed.
json::value mcp_normalize_schema(const json::value* input_schema);

/// Maps a `tools/call` result to the tool result object (docs/mcp.md,
/// "Results"): isError -> {"error": text}; structuredContent with text ->
/// {"result": text, "structuredContent": {...}}; without text ->
/// {"result": {...}}; otherwise {"result": text}. Image and audio blocks
/// are written to files under `media_dir` (created on demand) and appear
/// as "[image: <path> (<mime>)]"; resource blocks are rendered as text.
json::value mcp_result_to_tool_result(const json::value& call_result,
                                      const std::string& media_dir);

/// The per-server circuit breaker: `threshold` consecutive failures open it
/// for `cooldown`; after that the next call is a half-open probe.
struct mcp_breaker {
  int threshold = 3;
  std::chrono::seconds cooldown{60};
  int failures = 0;
  std::chrono::steady_clock::time_point open_until{};

  /// nullopt when a call may go ahead; otherwise the error text for the
  /// model (unreachable after N failures, retry in ~S s, do not retry now).
  std::optional<std::string>
  check(const std::string& server, std::chrono::steady_clock::time_point now
                                   = std::chrono::steady_clock::now()) const;
  void on_success() { failures = 0; open_until = {}; }
  void on_failure(std::chrono::steady_clock::time_point now
                  = std::chrono::steady_clock::now());
};

} // namespace mibyan
