// File: mcp_server/core_impl.hpp
//
// The private state of mcp_server_core (mcp_server/server_core.hpp),
// shared by its files: server_core.cpp (sessions, dispatch, ticker),
// core_outbound.cpp (sending, server-to-client requests, channels) and
// core_methods.cpp (tools and resources).
//
// Locking: `impl::mtx` guards the session map, the tool cache and
// `stopping`; each session's `mtx` guards that session. The core lock is
// taken before a session lock, never the other way; no lock is held while
// calling `outbound` or a backend hook.
#pragma once

#include "mcp_server/server_core.hpp"

#include <set>

namespace mibyan {

/// The MCP log levels by index, 0 debug .. 7 emergency (logging/setLevel,
/// notifications/message).
extern const char* const mcp_log_levels[8];

/// One running tools/call.
struct mcp_running_call {
  json::value id;
  std::string tool;
  bool has_token = false;
  json::value token;
  std::chrono::steady_clock::time_point started;
  std::chrono::steady_clock::time_point last_beat;
  int64_t beats = 0;
  /// The client cancelled or went away: no response is sent.
  bool abandoned = false;
  /// The runtime call id (mcp_tool_call::call_id), for per-call cancel.
  std::string call_id;
};

/// One request of ours waiting for the client's answer.
struct mcp_outgoing {
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  json::value result;
  std::string error; // done without a result
};

struct mcp_server_core::session {
  std::string id;
  std::string mibyan_id;
  mutable std::mutex mtx;
  mcp_outbound out;
  bool initialized = false;
  bool client_ready = false; // notifications/initialized seen
  bool closed = false;
  std::string version;
  bool elicit_form = false;
  int log_level = 3; // warning until logging/setLevel
  std::map<std::string, std::shared_ptr<mcp_running_call>> calls; // id.dump()
  std::map<int64_t, std::shared_ptr<mcp_outgoing>> outgoing;
  int64_t next_out_id = 1;
  std::chrono::steady_clock::time_point last_seen;
};

struct mcp_server_core::impl {
  using session_ptr = std::shared_ptr<session>;
  using outgoing = mcp_outgoing;

  mcp_backend backend;
  mcp_core_settings cfg;
  std::weak_ptr<mcp_server_core> self;

  mutable std::mutex mtx;
  std::map<std::string, session_ptr> sessions;
  bool stopping = false;
  /// The tool registry changed (watch_tools): the ticker checks the
  /// offered list at once instead of at its next interval.
  bool tools_dirty = false;
  uint64_t tools_watch = 0; // 0: none
  std::condition_variable tick_cv;
  std::thread ticker;
  std::atomic<uint64_t> call_counter{0};
  /// The tool list last seen (the list_changed check), by signature.
  std::string tools_signature;
  bool signature_known = false;
  std::set<std::string> tool_names;
  bool tools_known = false;

  // sending, server-to-client requests, channels (core_outbound.cpp)
  void send(const session_ptr& s, const json::value& msg,
            const json::value& related, bool final);
  void respond(const session_ptr& s, const json::value& id,
               json::value result);
  void fail(const session_ptr& s, const json::value& id, int code,
            const std::string& message);
  void notify(const session_ptr& s, const char* method, json::value params,
              const json::value& related);
  /// notifications/message when `level` (0 debug .. 7 emergency) passes
  /// the session's logging/setLevel.
  void log_to_client(const session_ptr& s, int level, const std::string& text,
                     const json::value& related);
  result<json::value> ask_client(const session_ptr& s, const char* method,
                                 json::value params,
                                 std::chrono::seconds timeout,
                                 const std::atomic<bool>* cancelled);
  void on_reply(const session_ptr& s, const json::value& msg);
  void install_channels(const session_ptr& s, bool elicit);

  // dispatch (server_core.cpp)
  void on_notification(const session_ptr& s, const std::string& method,
                       const json::value& params);
  void on_request(const session_ptr& s, const json::value& id,
                  const std::string& method, const json::value& params);
  bool initialized_now(const session_ptr& s);
  void initialize(const session_ptr& s, const json::value& id,
                  const json::value& params);
  void cancel(const session_ptr& s, const json::value& id,
              const std::string& why);

  // ticker (server_core.cpp)
  void tick_loop(std::weak_ptr<mcp_server_core> weak);
  void heartbeats(std::chrono::steady_clock::time_point now);
  void close_idle(mcp_server_core& core,
                  std::chrono::steady_clock::time_point now);

  // tools and resources (core_methods.cpp)
  /// The offered tools now; refreshes the cache (and says whether the
  /// list differs from the one seen before).
  result<std::vector<mcp_offered_tool>> current_tools(bool* changed);
  void check_tool_list();
  void list_tools(const session_ptr& s, const json::value& id,
                  const json::value& params);
  void call_tool(const session_ptr& s, const json::value& id,
                 const json::value& params);
  bool has_resources() const;
  void list_resources(const session_ptr& s, const json::value& id,
                      const json::value& params);
  void read_resource(const session_ptr& s, const json::value& id,
                     const json::value& params);
};

} // namespace mibyan
