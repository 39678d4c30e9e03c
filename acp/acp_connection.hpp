// File: acp/acp_connection.hpp
//
// The JSON-RPC 2.0 side of the Agent Client Protocol (docs/acp.md): one
// message per '\n'-terminated line on a pair of file descriptors (the
// agent's stdin and its protocol stdout). A reader thread splits and
// classifies incoming lines (tools/mcp/mcp_message), answers malformed ones
// with a JSON-RPC error and hands requests and notifications to the
// handlers; replies to the agent's own requests wake their waiters. A
// writer thread owns the output descriptor: every send only queues a line,
// so callers on runtime threads never block on a slow client.
//
// Limits: an incoming line longer than `max_line` bytes is discarded as it
// arrives and answered with -32600 (id null); the output queue is capped
// (`max_queued` bytes): past it the connection counts as broken and closes.
//
// Thread safety: every public member may be called from any thread.
// Handlers run on the reader thread, one at a time; they must not block
// on a request of this connection (no reply can be read meanwhile).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "base/json.hpp"
#include "base/status.hpp"

namespace mibyan {

/// JSON-RPC error codes ACP uses.
namespace acp_error {
constexpr int parse_error = -32700;
constexpr int invalid_request = -32600;
constexpr int method_not_found = -32601;
constexpr int invalid_params = -32602;
constexpr int internal_error = -32603;
constexpr int request_cancelled = -32800;
constexpr int resource_not_found = -32002;
} // namespace acp_error

class acp_connection {
public:
  struct handlers {
    /// A request of the client; answer it with reply / reply_error (from
    /// any thread, any time later).
    std::function<void(const json::value& id, const std::string& method,
                       const json::value& params)>
      on_request;
    /// A notification of the client.
    std::function<void(const std::string& method, const json::value& params)>
      on_notification;
    /// The input ended (EOF or a read error). Called once, last.
    std::function<void()> on_closed;
  };

  /// Uses `in_fd` / `out_fd` (not owned, not closed).
  acp_connection(int in_fd, int out_fd, size_t max_line = 8u << 20,
                 size_t max_queued = 256u << 20);
  /// Stops both threads (close() then join()).
  ~acp_connection();
  acp_connection(const acp_connection&) = delete;
  acp_connection& operator=(const acp_connection&) = delete;

  /// Starts the reader and writer threads. Once.
  void start(handlers h);

  void reply(const json::value& id, json::value result);
  void reply_error(const json::value& id, int code, const std::string& message);
  void notify(const std::string& method, json::value params);

  /// Sends a request to the client and waits for its answer: the result,
  /// or a failure (status_code::timeout after `timeout`, cancelled soon
  /// after `stop()` turns true (polled every 50 ms; may be empty),
  /// unavailable when the
  /// connection closes, internal with the client's error text). A request
  /// given up on is withdrawn with a `$/cancel_request` notification.
  /// Blocks: never call it on the reader thread.
  result<json::value> request(const std::string& method, json::value params,
                              std::chrono::milliseconds timeout,
                              const std::function<bool()>& stop);

  /// Marks the connection closed: waiting requests fail, nothing more is
  /// sent after the queued lines. Idempotent.
  void close();
  /// Waits for the reader thread to end (the input's EOF) and the writer
  /// to flush. Call after close() or once on_closed ran.
  void join();
  bool closed() const { return closed_.load(); }

  /// Lines read that could not be used (bad JSON, oversize, invalid);
  /// replies with an unknown id.
  uint64_t bad_lines() const { return bad_lines_.load(); }
  uint64_t unknown_replies() const { return unknown_replies_.load(); }

private:
  struct waiter {
    bool done = false;
    bool ok = false;
    json::value result;
    std::string error;
  };

  void read_loop();
  void write_loop();
  void send_line(std::string line);
  void handle_line(const std::string& line);

  int in_fd_;
  int out_fd_;
  size_t max_line_;
  size_t max_queued_;
  handlers h_;
  std::thread reader_;
  std::thread writer_;
  std::atomic<bool> closed_{false};
  std::atomic<uint64_t> bad_lines_{0};
  std::atomic<uint64_t> unknown_replies_{0};

  std::mutex out_mtx_;
  std::condition_variable out_cv_;
  std::deque<std::string> out_;
  size_t out_bytes_ = 0;
  bool writer_stop_ = false;

  std::mutex req_mtx_;
  std::condition_variable req_cv_;
  int64_t next_id_ = 0;
  std::map<int64_t, std::shared_ptr<waiter>> waiting_;
};

} // namespace mibyan
