// File: tools/mcp/mcp_tools.hpp
//
// The MCP servers of one runtime as registry tools (docs/mcp.md):
// `mcp_manager` owns one `mcp_session` per enabled server, connects them
// in parallel at start-up, keeps the lazy servers' schema cache and
// registers every admitted tool as `mcp__<server>__<tool>` plus the
// resource/prompt utility tools.
//
// A server's notifications/tools/list_changed (or a reconnection that
// brings another catalog) re-registers that server's tools in the
// registry given to register_tools, in one atomic registry change: a turn
// already running keeps the tool list it started with, the next one sees
// the new list. The runtime follows the registry's changes into the
// execute_code stubs (kernels/script_catalog.hpp).
//
// Threads: start() blocks its caller for at most the largest
// connect_timeout (servers connect concurrently on threads of their own).
// Everything else is thread-safe and returns promptly, except shutdown()
// (which waits for stdio servers to die, ~1 s at most each).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/stub_generator.hpp"
#include "tools/mcp/mcp_session.hpp"
#include "tools/registry.hpp"

namespace mibyan {

struct options;
class http_client;

/// One server as `mibyan mcp list` shows it.
struct mcp_server_report {
  std::string name;
  std::string transport;
  std::string state;        // idle, connecting, connected, failed, closed,
                            // disabled, lazy, needs_login (OAuth)
  std::string error;        // why it failed (stderr tail included)
  std::vector<std::string> tools;  // registered names
  double connect_ms = -1;   // start-up connect duration, -1 if none
};

class mcp_manager {
public:
  mcp_manager(const options& cfg, http_client* http);
  ~mcp_manager();

  /// Connects every enabled server concurrently, each within its
  /// connect_timeout; a lazy server with a valid schema cache is seeded
  /// from it instead and connects on its first call. Failures are logged
  /// (with the server's stderr tail) and never block the other servers.
  void start();

  /// Registers the tools of every server that has a catalog into `reg`,
  /// which must outlive this manager's shutdown() (later changes of a
  /// server's catalog are registered there too).
  /// A name that collides with a built-in tool is skipped, one that
  /// collides with another server's tool is rejected (fails closed), a
  /// name longer than 64 characters is rejected; each case adds a warning
  /// (also logged).
  std::vector<std::string> register_tools(tool_registry& reg);

  /// Server name -> the tool names registered for it, for the dynamic
  /// toolsets `mcp-<server>` (docs/mcp.md, "Toolsets"). Valid after
  /// register_tools.
  std::map<std::string, std::vector<std::string>> server_tools() const;

  /// Stub specs of the registered MCP tools for execute_code scripts
  /// (mcp_script_specs of the registry, as of the last registration).
  std::vector<script_tool_spec> script_specs() const;

  std::shared_ptr<mcp_session> find(const std::string& server) const;
  std::vector<std::shared_ptr<mcp_session>> sessions() const;
  std::vector<mcp_server_report> report() const;

  /// Installs the sampling handler on every session.
  void set_sampling_handler(mcp_sampling_fn fn);
  /// Installs the elicitation handler on every session.
  void set_elicitation_handler(mcp_elicitation_fn fn);
  /// Installs the roots provider on every session.
  void set_roots_provider(mcp_roots_fn fn);

  /// Closes every session (kills stdio process groups). Idempotent.
  void shutdown();

  /// The schema cache file of a server.
  static std::string cache_path(const std::string& home,
                                const std::string& server);

private:
  // What the sessions' tools-changed handlers reach: null after shutdown.
  struct link {
    std::mutex mtx; // also guards reg_, registered_, script_specs_
    mcp_manager* self = nullptr;
  };
  void collect(const std::shared_ptr<mcp_session>& s, const tool_registry& reg,
               std::vector<std::unique_ptr<tool>>& out,
               std::vector<std::string>& names,
               std::vector<std::string>& warnings) const;
  void reregister(const std::shared_ptr<mcp_session>& s);

  const options& cfg_;
  http_client* http_;
  std::shared_ptr<link> link_;
  tool_registry* reg_ = nullptr;
  std::vector<std::shared_ptr<mcp_session>> sessions_;
  std::map<std::string, double> connect_ms_;
  std::map<std::string, std::vector<std::string>> registered_;
  std::vector<script_tool_spec> script_specs_;
};

/// Stub specs of the MCP tools registered in `reg` now, sorted by name
/// (`mibyan_tools.mcp.<server>.<tool>`); a schema that cannot be rendered
/// as a Python signature gives a keyword-only stub. Any thread.
std::vector<script_tool_spec> mcp_script_specs(const tool_registry& reg);

/// Writes / reads the schema cache of `session` (tools + capabilities,
/// keyed by a fingerprint of the server's command/url). read returns false
/// when the file is missing, unreadable or for another configuration.
bool mcp_write_schema_cache(const std::string& path, const mcp_session& s);
bool mcp_read_schema_cache(const std::string& path,
                           const mcp_server_options& s,
                           std::vector<mcp_tool_info>* tools, bool* resources,
                           bool* prompts);

} // namespace mibyan
