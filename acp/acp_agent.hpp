// File: acp/acp_agent.hpp
//
// The ACP agent of `mibyan acp` (docs/acp.md): the protocol methods over
// one acp_connection, each ACP session bound to a runtime session with its
// working directory, approval channel (session/request_permission), file
// access through the client (fs/read_text_file, fs/write_text_file), the
// MCP servers the client named, and its prompt turns, whose deltas and tool
// events become session/update notifications.
//
// Methods: initialize, authenticate, session/new, session/load,
// session/prompt, session/set_mode, session/close and the session/cancel
// notification;
// anything else is -32601, anything but initialize before initialize is
// -32600.
//
// Threads: requests arrive on the connection's reader thread and are
// answered from there (quick ones), from a worker thread (session/new and
// session/load, which start MCP servers and read the store) or from the
// runtime thread that ends a turn. Runtime callbacks (deltas, tool events)
// only queue notifications. The approval and file callbacks block on their
// blocking-pool thread while the client answers.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "acp/acp_connection.hpp"
#include "base/json.hpp"
#include "base/status.hpp"

namespace mibyan {

class runtime;
struct acp_session; // acp/acp_session.hpp

struct acp_agent_settings {
  /// agentInfo.version.
  std::string version = "0.1.0";
  /// How long a fs/read_text_file or fs/write_text_file may take.
  std::chrono::milliseconds fs_timeout{30000};
};

class acp_agent {
public:
  acp_agent(runtime& rt, acp_connection& conn, acp_agent_settings s = {});
  /// Calls shutdown().
  ~acp_agent();
  acp_agent(const acp_agent&) = delete;
  acp_agent& operator=(const acp_agent&) = delete;

  /// The connection's handlers.
  void on_request(const json::value& id, const std::string& method,
                  const json::value& params);
  void on_notification(const std::string& method, const json::value& params);
  /// The client went away: every running turn is interrupted.
  void on_closed();

  /// Interrupts running turns, waits (at most `wait`) for them to end,
  /// joins the worker threads, closes the sessions' MCP servers and
  /// removes their channels. Idempotent.
  void shutdown(std::chrono::milliseconds wait = std::chrono::seconds(20));

private:
  using session_ptr = std::shared_ptr<acp_session>;

  void initialize(const json::value& id, const json::value& params);
  void new_session(const json::value& id, const json::value& params);
  void load_session(const json::value& id, const json::value& params);
  void prompt(const json::value& id, const json::value& params);
  void set_mode(const json::value& id, const json::value& params);
  void close_session(const json::value& id, const json::value& params);
  /// Releases what the runtime keeps for `s` (channels, file access, its
  /// MCP servers; with `close`, its kernels and conversation too).
  void release(const session_ptr& s, bool close);
  void cancel(const json::value& params);

  /// Runs `fn` on a worker thread of its own (joined when it ended and
  /// another starts, or by shutdown); false when 64 run already.
  bool spawn_work(std::function<void()> fn);
  session_ptr find(const std::string& id);
  /// Binds the runtime's per-session hooks (channels, file access) of
  /// runtime session `rsid` to `s`.
  void bind_runtime_session(const session_ptr& s, const std::string& rsid);
  /// Creates the session object for `sid` with `cwd` and the client's
  /// MCP servers; invalid_argument with why when a server entry is
  /// malformed or its transport is not offered.
  result<session_ptr> open_session(const std::string& sid,
                                   const std::string& cwd,
                                   const json::value& mcp_servers);
  json::value modes_of(const acp_session& s) const;
  void send_commands(const acp_session& s);
  /// A slash command of the prompt, handled here; false when `text` is
  /// none of ours.
  bool run_command(const session_ptr& s, const json::value& id,
                   const std::string& text);
  void update(const std::string& sid, json::value u);
  /// Applies the mode `s` now has (`mode`, runtime session `rsid`): sets
  /// the runtime's session yolo flag and sends current_mode_update.
  void announce_mode(const acp_session& s, const std::string& rsid,
                     const std::string& mode);
  void replay_history(const acp_session& s);

  runtime& rt_;
  acp_connection& conn_;
  acp_agent_settings settings_;

  std::mutex mtx_;
  std::condition_variable idle_cv_;
  bool initialized_ = false;
  bool closing_ = false;
  bool fs_read_ = false;
  bool fs_write_ = false;
  std::map<std::string, session_ptr> sessions_;
  struct worker {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::vector<worker> workers_;
  int running_ = 0;
};

} // namespace mibyan
