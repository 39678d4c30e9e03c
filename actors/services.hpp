// File: actors/services.hpp
//
// The shared, long-lived parts of one runtime that actors use: the
// configuration, the tool registry, the blocking-work pool, the HTTP
// client, the clock and the process launcher. Created once by `runtime`,
// shared by pointer with every actor.
//
// Thread safety: all members are either immutable after construction
// (cfg, tools, default_cwd) or internally synchronised (pool, http, clock,
// launcher).
#pragma once

#include <memory>
#include <string>

#include "actors/background_board.hpp"
#include "base/clock.hpp"
#include "approvals/approval_service.hpp"
#include "config/options.hpp"
#include "base/blocking_pool.hpp"
#include "kernels/process_launcher.hpp"
#include "kernels/stub_generator.hpp"
#include "tools/registry.hpp"
#include "tools/agent/agent_tool_state.hpp"
#include "tools/toolsets.hpp"

namespace mibyan {

class script_catalog;


class http_client;
class redactor_slot;
class process_registry;
class mcp_manager;
class kernel_checkpoints;

struct runtime_services {
  options cfg;
  tool_registry tools;
  /// Working directory used when a request names none.
  std::string default_cwd;
  std::unique_ptr<blocking_pool> pool;
  /// Shared HTTP client; may be null in unit tests.
  std::shared_ptr<http_client> http;
  /// Secret redactor for tool results and kernel output, replaced when
  /// .env changes (base/redact_slot.hpp); null means process_redactor().
  std::shared_ptr<redactor_slot> redact;
  /// Tracked background processes; may be null in unit tests.
  std::shared_ptr<process_registry> processes;
  /// The tools execute_code scripts may call, as stub specs: the built-in
  /// tools whose script() policy allows them (from their schemas), then the
  /// host tools registered with `allow_in_scripts` (docs/embedding.md) and
  /// the MCP tools. Their names are in `tools` too.
  std::vector<script_tool_spec> script_tools;
  /// The same set as it changes at run time (an MCP server's
  /// tools/list_changed with code_execution.mcp_in_scripts): new kernels
  /// start with its current snapshot, running kernels take a newer one
  /// before their next cell. `script_tools` stays the start-up set (the
  /// kernel key). Null in unit tests that build services by hand.
  std::shared_ptr<script_catalog> scripts;
  /// The approval gate (docs/approvals.md); set by the runtime.
  std::unique_ptr<approval_service> approvals;
  /// The MCP servers (docs/mcp.md); null without `mcp_servers`. Its
  /// server_tools() is the server -> tool names map for the `mcp-<server>`
  /// toolsets.
  std::shared_ptr<mcp_manager> mcp;
  /// State of the agent tools (store, clarify channel, active skills,
  /// todo lists); internally synchronised. Set by the runtime.
  std::shared_ptr<agent_tool_state> agent_tools;
  /// Named toolsets; dynamic ones may be added at any time (internally
  /// synchronised). Null means the static table.
  std::shared_ptr<toolset_catalog> toolsets;
  /// Background work of the runtime's sessions: running children per
  /// session and the listeners of finished work (actors/background_board.hpp).
  /// Never null in a runtime.
  std::shared_ptr<background_board> background
    = std::make_shared<background_board>();
  /// Kernel namespace checkpoints (actors/kernel_checkpoints.hpp); set by
  /// the runtime, internally synchronised. Null in unit tests that build
  /// services by hand (no checkpoints).
  std::shared_ptr<kernel_checkpoints> checkpoints;
  /// The time the actors' logic reads (deadlines, idle reaping,
  /// heartbeats, back-off; base/clock.hpp). Never null: the machine's
  /// clocks unless a test injects a manual one.
  clock_ptr clock = real_clock();
  /// Starts kernels and tool commands (kernels/process_launcher.hpp).
  /// Never null: real processes unless a test injects its own.
  launcher_ptr launcher = real_process_launcher();
};

using services_ptr = std::shared_ptr<const runtime_services>;

} // namespace mibyan
