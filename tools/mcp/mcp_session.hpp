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
//   server sends (ping, roots/list) are answered from the callback,
//   sampling/createMessage and elicitation/create on a thread of their
//   own (tools/mcp/mcp_session_serve.cpp).
// - notifications/tools/list_changed re-lists the tools on a thread of its
//   own (coalesced) and then calls the tools-changed handler, which
//   re-registers them (mcp_manager).
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
constexpr const char* mcp_protocol_version = "2025-11-25";

/// Whether Mibyan speaks protocol version `v` a server answered with:
/// 2025-11-25, 2025-06-18, 2025-03-26 and 2024-11-05 (legacy SSE servers).
bool mcp_version_supported(const std::string& v);

/// Who makes a call: the Mibyan session (for elicitation) and its working
/// directory.
struct mcp_caller {
  std::string session_id;
  std::string cwd;
};

/// A server's `elicitation/create` in form mode (docs/mcp.md,
/// "Elicitation").
struct mcp_elicitation_request {
  std::string server;
  /// The Mibyan session whose call to this server is running ("" when
  /// none is: the request came outside a call).
  std::string session_id;
  std::string message;
  /// requestedSchema: an object of primitive properties.
  json::value schema;
  /// How long the answer may take.
  std::chrono::milliseconds timeout{0};
  /// Turns true when the call that caused the request ends or the server
  /// connection closes: stop asking and answer "cancel". Never null.
  const std::atomic<bool>* cancelled = nullptr;
};

/// Answers an elicitation: an ElicitResult object {"action": "accept" |
/// "decline" | "cancel", "content": {...} with accept}. Runs on a thread
/// of its own; must honour `timeout` and `*cancelled`. The session applies
/// the schema's defaults to an accepted content and checks it.
using mcp_elicitation_fn =
  std::function<json::value(const mcp_elicitation_request&)>;

/// The client's roots outside a call (or for a call without a working
/// directory): absolute directories, sent as file:// URIs. A call's own
/// `mcp_caller::cwd` comes first. Called on the transport's thread: quick,
/// no blocking.
using mcp_roots_fn = std::function<std::vector<std::string>()>;

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
  /// A call that finds the server's session expired (HTTP 404) connects
  /// afresh and is sent once more (nothing of it ran).
  json::value call_tool(const std::string& raw_name, const json::value& args,
                        const std::atomic<bool>* cancel,
                        std::chrono::steady_clock::time_point deadline,
                        const std::string& media_dir,
                        const mcp_caller* caller = nullptr);

  /// Like call_tool for the utility tools: `method` with `params`, the
  /// result rendered as {"result": <result>}.
  json::value call_method(const std::string& method, json::value params,
                          const std::atomic<bool>* cancel,
                          std::chrono::steady_clock::time_point deadline,
                          const mcp_caller* caller = nullptr);

  /// A `ping` round trip; fails like request().
  status ping(std::chrono::milliseconds timeout);

  /// Closes the connection (kills a stdio server's group); the next call
  /// reconnects. Used for recycling and after a crash.
  void disconnect(const std::string& why);

  /// Closes for good: later calls fail.
  void close();

  void set_sampling_handler(mcp_sampling_fn fn);
  /// Without a handler every elicitation is declined.
  void set_elicitation_handler(mcp_elicitation_fn fn);
  /// Without a provider the roots are the process's working directory.
  void set_roots_provider(mcp_roots_fn fn);
  /// Tells a connected server that the roots changed
  /// (notifications/roots/list_changed); it asks roots/list again.
  void notify_roots_changed();
  /// Called (on a session thread) after the catalog changed: a
  /// list_changed re-listing or a reconnection brought a different tool
  /// list. Quick; it may read tools().
  void set_tools_changed_handler(std::function<void()> fn);

  // -- observers (thread-safe snapshots) -------------------------------------

  state current_state() const;
  static const char* state_name(state s);
  std::vector<mcp_tool_info> tools() const;
  /// The protocol version of the current connection ("" before one).
  std::string protocol_version() const;
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
  void serve_elicitation(uint64_t gen, json::value id, json::value params);
  // The answer to roots/list; `sent` gets the directories it names.
  json::value roots_result(std::vector<std::string>* sent);
  // Records an answer written to the server and wakes sync_roots.
  void roots_answered(std::vector<std::string> dirs);
  // The roots a call of `caller` sees: the configured list, else the
  // caller's working directory, else the provider's (process cwd).
  std::vector<std::string> roots_for(const mcp_caller* caller) const;
  // Before a call: when the server asked roots/list on this connection
  // and the caller's roots differ from the last answer, sends
  // notifications/roots/list_changed and waits (at most 2 s, the deadline
  // or an interrupt) for the server to ask again.
  void sync_roots(const mcp_caller& caller, const std::atomic<bool>* cancel,
                  std::chrono::steady_clock::time_point deadline);
  void schedule_refresh();
  void refresh_loop();
  void tools_changed_from(const std::vector<mcp_tool_info>& before);
  result<std::vector<mcp_tool_info>>
  list_tools(std::chrono::steady_clock::time_point deadline);
  status handshake(std::chrono::steady_clock::time_point deadline);
  json::value call_once(const std::string& method, const json::value& params,
                        const std::atomic<bool>* cancel,
                        std::chrono::steady_clock::time_point deadline,
                        const std::string& what, bool* expired);
  // The elicitations running for the caller `token` (0: none).
  struct elicit_slot {
    uint64_t caller = 0;
    std::atomic<bool> stop{false};
  };
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
  mcp_elicitation_fn elicitation_;
  mcp_roots_fn roots_;
  std::function<void()> tools_changed_fn_;
  std::string version_;
  // The calls running now, oldest first: token -> caller.
  std::vector<std::pair<uint64_t, mcp_caller>> callers_;
  // Roots on the current connection: whether the server asked, what it
  // was told last, and how many answers it got (wakes sync_roots).
  bool roots_asked_ = false;
  std::vector<std::string> roots_sent_;
  uint64_t roots_answers_ = 0;
  uint64_t next_caller_ = 1;
  std::vector<std::shared_ptr<elicit_slot>> elicitations_;
  bool refreshing_ = false;
  bool refresh_again_ = false;

  std::mutex connect_mtx_; // one connect at a time
  std::timed_mutex call_mtx_; // sequential servers: one call at a time
  std::atomic<int> active_{0};
  std::atomic<bool> tools_changed_{false};
  std::atomic<int> helper_threads_{0}; // sampling, elicitation, refresh
};

} // namespace mibyan
