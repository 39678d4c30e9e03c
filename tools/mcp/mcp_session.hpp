// File: tools/mcp/mcp_session.hpp
//
// One MCP server connection, CAF-free (docs/mcp.md): the transport, the
// JSON-RPC id space, the initialize handshake, the tool catalog, calls with
// timeout and cancellation, pings, reconnection and the per-server circuit
// breaker. The `mcp_server` actor (actors/mcp_server.hpp) drives its
// keepalive and recycling; tool calls reach it from blocking-pool threads
// through the registry tools of tools/mcp/mcp_tools.hpp.
//
// Threads and locks:
// - Every public member is thread-safe. `connect`, `call_tool`, `request`
//   and `ping` block their caller (a blocking-pool or start-up thread, never
//   a CAF scheduler thread) for at most their timeout.
// - Calls are serialised by a per-server call lock unless the server has
//   `supports_parallel_tool_calls`.
// - Transport callbacks only fill replies and wake waiters; requests the
//   server sends (ping, roots/list, sampling/createMessage) are answered
//   from the callback, sampling on a thread of its own.
// - The transport is closed outside the state lock (its reader thread may
//   be waiting for that lock in a callback).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/json.hpp"
#include "base/status.hpp"
#include "config/mcp_options.hpp"
#include "tools/mcp/mcp_catalog.hpp"
#include "tools/mcp/mcp_message.hpp"
#include "tools/mcp/mcp_transport.hpp"

namespace mibyan {

struct options;
class http_client;

/// The protocol version Mibyan asks for.
constexpr const char* mcp_protocol_version = "2025-06-18";

/// One tool of a server's catalog.
struct mcp_tool_info {
  std::string name;         // raw name
  std::string description;
  json::value input_schema; // as the server sent it (may be null)
  bool read_only = false;   // annotations.readOnlyHint
};

/// Answers a server's `sampling/createMessage` (params in, result out).
/// Runs on a thread of its own; must honour `timeout`.
using mcp_sampling_fn = std::function<result<json::value>(
  const std::string& server, const json::value& params,
  std::chrono::milliseconds timeout)>;

class mcp_session {
public:
  enum class state { idle, connecting, connected, failed, closed };

  mcp_session(mcp_server_options s, const options& cfg, http_client* http);
  ~mcp_session();
  mcp_session(const mcp_session&) = delete;
  mcp_session& operator=(const mcp_session&) = delete;

  const mcp_server_options& config() const { return s_; }

  /// Starts the transport, runs initialize / notifications/initialized /
  /// tools/list (all pages), within connect_timeout. A connected session
  /// is left alone. On failure the state is `failed` and the status says
  /// why, with the server's stderr tail for stdio.
  status connect();

  /// Sends a request and waits for its reply's `result`. Fails with
  /// timeout (after sending notifications/cancelled), cancelled (likewise,
  /// when `*cancel` became true), unavailable (connection lost) or
  /// internal (a JSON-RPC error reply, its message included).
  result<json::value> request(const std::string& method, json::value params,
                              std::chrono::milliseconds timeout,
                              const std::atomic<bool>* cancel = nullptr);

  /// One tool call as a tool result object (docs/mcp.md, "Results"):
  /// breaker, (re)connect, call lock, timeout = min(config timeout,
  /// `deadline`), cancellation, result mapping. Never throws.
  json::value call_tool(const std::string& raw_name, const json::value& args,
                        const std::atomic<bool>* cancel,
                        std::chrono::steady_clock::time_point deadline,
                        const std::string& media_dir);

  /// Like call_tool for the utility tools: `method` with `params`, the
  /// result rendered as {"result": <result>}.
  json::value call_method(const std::string& method, json::value params,
                          const std::atomic<bool>* cancel,
                          std::chrono::steady_clock::time_point deadline);

  /// A `ping` round trip; fails like request().
  status ping(std::chrono::milliseconds timeout);

  /// Closes the connection (kills a stdio server's group); the next call
  /// reconnects. Used for recycling and after a crash.
  void disconnect(const std::string& why);

  /// Closes for good: later calls fail.
  void close();

  void set_sampling_handler(mcp_sampling_fn fn);

  // -- observers (thread-safe snapshots) -------------------------------------

  state current_state() const;
  static const char* state_name(state s);
  std::vector<mcp_tool_info> tools() const;
  bool has_resources() const;
  bool has_prompts() const;
  std::string last_error() const;
  std::string stderr_tail() const;
  int pid() const;
  /// Calls past the call lock (connecting or waiting for their reply).
  int active_calls() const { return active_.load(); }
  std::chrono::steady_clock::time_point last_used() const;
  std::chrono::steady_clock::time_point connected_at() const;
  /// The server sent notifications/tools/list_changed since the last
  /// discovery.
  bool tools_changed() const { return tools_changed_.load(); }
  /// Seeds the catalog from the schema cache (lazy servers).
  void seed_catalog(std::vector<mcp_tool_info> tools, bool resources,
                    bool prompts);

private:
  struct pending {
    bool done = false;
    bool ok = false;
    json::value result;
    std::string error;
  };

  void on_message(uint64_t gen, std::string text);
  void on_one(uint64_t gen, mcp_incoming msg);
  void on_closed(uint64_t gen, std::string why);
  void answer(uint64_t gen, const json::value& id, json::value result,
              const json::value* error = nullptr);
  void serve_sampling(uint64_t gen, json::value id, json::value params);
  status send_locked_free(const std::string& text);
  status handshake(std::chrono::steady_clock::time_point deadline);
  json::value error_for_failure(const std::string& what,
                                const status& st) const;

  mcp_server_options s_;
  const options& cfg_;
  http_client* http_;

  mutable std::mutex mtx_; // everything below
  std::condition_variable cv_;
  std::shared_ptr<mcp_transport> transport_;
  uint64_t gen_ = 0;
  state state_ = state::idle;
  int64_t next_id_ = 1;
  std::map<int64_t, std::shared_ptr<pending>> pending_;
  std::vector<mcp_tool_info> tools_;
  bool resources_ = false;
  bool prompts_ = false;
  std::string last_error_;
  std::string last_stderr_;
  mcp_breaker breaker_;
  std::chrono::steady_clock::time_point last_used_{};
  std::chrono::steady_clock::time_point connected_at_{};
  mcp_sampling_fn sampling_;
  std::deque<std::chrono::steady_clock::time_point> sampling_times_;

  std::mutex connect_mtx_; // one connect at a time
  std::timed_mutex call_mtx_; // sequential servers: one call at a time
  std::atomic<int> active_{0};
  std::atomic<bool> tools_changed_{false};
  std::atomic<int> sampling_threads_{0};
};

} // namespace mibyan
