// File: mcp_server/runtime_backend.hpp
//
// Binds the MCP server core's hooks (mcp_server/backend.hpp) to a running
// `mibyan::runtime`: the offered tools are the runtime's registry resolved
// through its toolsets (`toolsets`, else the configured `agent.toolsets`),
// each described by its own schema(); calls go through
// runtime::call_tool_async under the MCP session's Mibyan session id (so
// execute_code keeps one kernel per MCP session, and budgets, sandbox,
// approvals and redaction apply as for any call); channels go through
// runtime::set_session_channels; transcripts are read from the session
// store on the runtime's blocking pool.
//
// Thread safety: the hooks may be called from any thread; `rt` must
// outlive every use of the backend.
#pragma once

#include <string>
#include <vector>

#include "mcp_server/backend.hpp"
#include "runtime/runtime.hpp"

namespace mibyan {

/// The backend for `rt` offering the tools of `toolsets` (empty: the
/// configured selection). `cwd` is the working directory of the calls
/// ("" = the runtime's default).
mcp_backend runtime_mcp_backend(runtime& rt, std::vector<std::string> toolsets,
                                std::string cwd);

} // namespace mibyan
