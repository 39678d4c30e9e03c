// File: runtime/runtime.hpp
//
// The library-internal view of the runtime: the public class of
// include/mibyan/runtime.hpp plus the private types its internal members
// use (the full option struct, the tool interface and registry). The CLI,
// the benchmarks and the tests include this header; applications include
// mibyan/runtime.hpp (docs/embedding.md).
#pragma once

#include "mibyan/runtime.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.hpp"

#include "config/options.hpp"
#include "tools/registry.hpp"
#include "tools/tool.hpp"

namespace mibyan {

/// Reaches the private parts of a runtime, for the files of runtime/ and
/// the node's wiring (the constructor and `impl` are private).
struct runtime_access {
  using impl = runtime::impl;
  static std::unique_ptr<runtime> make(std::unique_ptr<impl> p);
  static impl& of(runtime& rt) { return *rt.impl_; }
};

/// The internals of a runtime (runtime/runtime_impl.hpp defines them).
using runtime_impl = runtime_access::impl;

/// Library-internal: builds a runtime from the full option struct
/// (config/options.hpp). `extra_tools` are offered next to the core tools
/// (a tool with a core tool's name replaces it). Every create also hardens
/// the process once (docs/security.md): not dumpable, provider credentials
/// moved out of the environment, signal dispositions still at their
/// default adjusted; it fails when `code_execution.sandbox` is "required"
/// and the kernel sandbox is unavailable. Errors: config_invalid for bad
/// options, internal for any other start-up failure (an unusable home, a
/// failed message self-test).
result<std::unique_ptr<runtime>>
create_runtime(options opts,
               std::vector<std::unique_ptr<tool>> extra_tools = {});

/// The configuration `rt` runs with, and its tool registry.
const options& config_of(const runtime& rt);
const tool_registry& tools_of(const runtime& rt);

class session_store;
class kernel_checkpoints;
class toolset_catalog;
class turn_event_hub;
struct mcp_server_report;

/// The session store `rt` writes (nullptr when it could not be opened).
/// Reads may run on any thread; writes other than deletes go through the
/// runtime's actors. For the node's own front ends (the HTTP server).
std::shared_ptr<session_store> session_store_of(runtime& rt);
/// The runtime's kernel checkpoints (actors/kernel_checkpoints.hpp); the
/// cluster member installs its key and routes.
std::shared_ptr<kernel_checkpoints> kernel_checkpoints_of(runtime& rt);

class file_checkpointer;

/// The file-checkpoint tracker of `rt` (tools/file_checkpointer.hpp,
/// docs/checkpoints.md): `mibyan chat`'s /rollback posts its marker there
/// for the session's next turn. Never null.
std::shared_ptr<file_checkpointer> checkpointer_of(runtime& rt);

class pending_approvals;

/// The pending-request registry of `rt` (runtime/pending_approvals.hpp):
/// for the node's own front ends and the coordinator's event wiring.
pending_approvals& pending_of(runtime& rt);

/// The toolsets of `rt` (tools/toolsets.hpp): resolve a selection, or
/// register dynamic sets (MCP servers, plugins) at any time.
toolset_catalog& toolsets_of(runtime& rt);

/// The turn-event hub of `rt` (runtime/turn_events.hpp): subscribe to the
/// events of every turn `rt` runs, or list the turns running now.
turn_event_hub& turn_events_of(runtime& rt);

// -- the operator console's views (runtime/runtime_ops.cpp) -----------------

/// One execute_code kernel of `rt`.
struct kernel_view {
  /// Its owner: a session id, or "<session>::child::<id>" (a subagent).
  std::string session_id;
  int64_t pid = 0;
  std::string mode;    // project | strict
  std::string sandbox; // bwrap | none
  int64_t uptime_s = 0;
  int64_t cells = 0;
  /// Resident memory of the process and its descendants (0 if unreadable).
  int64_t rss_bytes = 0;
  bool busy = false;
};

/// Lists the kernels of `rt`. Never blocks: asks the kernel registry, then
/// reads each process's memory (/proc) on the runtime's blocking pool,
/// where `done` runs, once; with an error ("" = none) when the registry
/// does not answer within 5 s or the runtime is stopping. Any thread.
void list_kernels(runtime& rt,
                  std::function<void(std::vector<kernel_view>, std::string)>
                    done);

/// Kills the kernels of `session_id` and of its subagents; its
/// conversation stays, and its next execute_code cell starts a fresh kernel
/// (as execute_code's `reset`). Never blocks; any thread.
void reset_kernels(runtime& rt, const std::string& session_id);

/// The configured MCP servers of `rt` (empty without `mcp_servers`).
/// Any thread; returns promptly.
std::vector<mcp_server_report> mcp_servers_of(runtime& rt);

/// Disconnects MCP server `name` and connects it again (its tools as the
/// server now lists them). Blocks up to the server's connect_timeout: call
/// it on a pool thread, never an I/O or scheduler thread. not_found for a
/// name that is not configured and enabled; the connect error otherwise.
status reconnect_mcp(runtime& rt, const std::string& name);

/// Runs `job` on the runtime's blocking pool; false (and `job` dropped)
/// when the pool is stopping. Any thread.
bool run_blocking(runtime& rt, std::function<void()> job);

} // namespace mibyan
