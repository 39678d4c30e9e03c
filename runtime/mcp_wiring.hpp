// File: runtime/mcp_wiring.hpp
//
// Where the MCP client meets the runtime (docs/mcp.md): start-up
// discovery and registration while the services are built, the upkeep
// actors and the sampling bridge once the actor system runs, and the
// shutdown. Only runtime/*.cpp include this.
#pragma once

#include <string>
#include <vector>

#include "kernels/stub_generator.hpp"
#include "runtime/runtime.hpp"

namespace mibyan {

struct runtime_services;

/// Connects the configured MCP servers (in parallel, each within its
/// connect_timeout), registers their tools in `svc.tools` and, with
/// `code_execution.mcp_in_scripts`, appends their script stubs to
/// `script_host_tools`. No-op without `mcp_servers`.
void start_mcp(runtime_services& svc,
               std::vector<script_tool_spec>& script_host_tools);

/// Spawns one `mcp_server` upkeep actor per session into `p.mcp_actors`
/// and, when a server enables sampling and a model is configured, a
/// provider connection that serves `sampling/createMessage`.
void wire_mcp(runtime_impl& p);

} // namespace mibyan
