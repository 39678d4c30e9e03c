// File: acp/acp_mcp.hpp
//
// The MCP servers an ACP client names in session/new or session/load
// (docs/acp.md, "MCP servers"): started for that session only (stdio, and
// Streamable HTTP), their tools registered as `mcp__<server>__<tool>` in a
// registry that only the session's turns see
// (runtime/session_access.hpp, set_session_tools). They are not offered to
// execute_code scripts and get no keepalive pings or recycling; sampling
// requests of these servers are refused, elicitation is not offered, and
// their roots are the session's working directory.
//
// Thread safety: start() blocks for at most the servers' connect timeout;
// bind() and stop() may be called from any thread (stop() waits for stdio
// servers to exit, about a second each at most).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/json.hpp"

namespace mibyan {

class runtime;
struct options;
class mcp_manager;
class tool_registry;

class acp_session_tools {
public:
  /// Parses `servers` (ACP McpServer objects), connects them concurrently
  /// and registers their tools. Null with `why` for a malformed entry or
  /// a transport that is not offered (sse); a server that fails to
  /// connect is logged and offers no tools.
  static std::shared_ptr<acp_session_tools>
  start(runtime& rt, const std::string& cwd, const json::value& servers,
        std::string& why);

  ~acp_session_tools();

  /// Offers the tools to the turns of runtime session `session_id`.
  void bind(const std::string& session_id);
  /// Withdraws the tools from every bound session and closes the servers.
  /// Idempotent.
  void stop();
  /// The registered tool names.
  std::vector<std::string> names() const;

private:
  acp_session_tools() = default;

  runtime* rt_ = nullptr;
  std::unique_ptr<options> cfg_;
  std::unique_ptr<mcp_manager> mgr_;
  std::shared_ptr<tool_registry> reg_;
  std::mutex mtx_;
  std::vector<std::string> bound_;
  bool stopped_ = false;
};

} // namespace mibyan
