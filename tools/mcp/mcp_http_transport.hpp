// File: tools/mcp/mcp_http_transport.hpp
//
// The Streamable HTTP (and legacy SSE) client transport behind
// make_mcp_http_transport (tools/mcp/mcp_http.hpp), internal to its two
// files: tools/mcp/mcp_http.cpp (requests, their outcomes, delivery, close)
// and tools/mcp/mcp_http_reconnect.cpp (resumption and reconnection on the
// worker thread, the legacy SSE start). Not for other callers.
//
// Threads: the HTTP client's thread runs the transfer callbacks and the
// outcomes; the transport's worker thread runs delayed tasks (reconnects,
// the authorization hook); `mtx_` guards the fields up to inflight_,
// `wmtx_` the worker's queue.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "base/http_client.hpp"
#include "tools/mcp/mcp_http.hpp"

namespace mibyan::mcp_http_detail {

using clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

/// Whether `s` holds only white space.
inline bool blank(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
  });
}

// One message sent by POST, or the GET stream: what its SSE stream
// delivered so far, for resumption. Shared by the callbacks of every
// transfer that carries it (the POST, then resuming GETs).
struct exchange {
  std::string message;       // the POSTed text ("" for the GET stream)
  std::string request_id;    // dump() of the request's id ("" if none)
  std::string method;        // the message's method ("" for replies)
  bool listen = false;       // the GET stream for server messages
  bool replied = false;      // the reply to `request_id` was delivered
  bool failed = false;       // an error reply was delivered instead
  std::string last_id;       // the last SSE event id seen
  int64_t retry_ms = -1;     // the server's last `retry`
  int failures = 0;          // failed (re)connections in a row
  bool auth_retried = false; // on_unauthorized said "try again" once
  bool unreachable = false;  // the last attempt got no HTTP response
  bool undelivered = false;  // counted in undelivered_ until its POST ends
};

// The response of one transfer.
struct response {
  long status = 0;
  bool sse = false;
  bool had_session = false; // the request carried Mcp-Session-Id
  bool events = false;      // the stream delivered at least one event
  std::string body;
  std::string www_authenticate;
  std::unique_ptr<mcp_sse_stream> parser;
  std::string stop; // why the receiver stopped the transfer
};

class http_transport : public mcp_transport {
public:
  http_transport(mcp_http_settings s, http_client& http);

  ~http_transport() override { close(); }

  status start(handlers h, milliseconds timeout) override;

  status send(const std::string& message) override;

  int undelivered() const override { return undelivered_.load(); }

  status drain(milliseconds timeout) override;

  void set_protocol_version(const std::string& v) override {
    std::lock_guard<std::mutex> guard{mtx_};
    version_ = v;
  }

  void close() override;

private:
  // Counts a transfer's callbacks as running until on_done returns: the
  // last thing each one does is this decrement, so once pending_callbacks_
  // is 0 no callback touches `this` any more (close() waits for that).
  struct callback_guard {
    std::atomic<int>& n;
    ~callback_guard() { n.fetch_sub(1); }
  };

  // -- requests ------------------------------------------------------------

  // A request with the configured headers, the bearer token, the session
  // id and (from 2025-06-18 on) the negotiated protocol version.
  http_request base_request(const std::string& method, const std::string& url,
                            bool* had_session = nullptr);

  // A transfer submitted while close() runs is cancelled at once (close()
  // may have taken the in-flight set already).
  void track(http_request_id id);
  void untrack(http_request_id id) {
    std::lock_guard<std::mutex> guard{mtx_};
    inflight_.erase(id);
  }

  // Handles one SSE event of `x`'s stream; false stops the transfer.
  bool on_event(exchange& x, response& rx, const sse_event& e);

  // The SSE parser of a response stream; `x` and `rx` outlive it.
  std::unique_ptr<mcp_sse_stream> make_parser(exchange* x, response* rx) {
    return std::make_unique<mcp_sse_stream>(
      s_.max_message_bytes,
      [this, x, rx](const sse_event& e) { return on_event(*x, *rx, e); });
  }

  // Callbacks of a POST or GET transfer filling `rx`.
  http_callbacks receive(std::shared_ptr<exchange> x,
                         std::shared_ptr<response> rx);

  void submit_post(std::shared_ptr<exchange> x);

  // The GET stream (x->listen) or a resumption of `x`'s stream.
  void submit_get(std::shared_ptr<exchange> x);

  // -- outcomes (HTTP client thread) ---------------------------------------

  // An error reply for `x`'s request (once), or a log line.
  void fail(exchange& x, const std::string& why);
  // The server forgot the session (`detail`: its answer): `x` fails with
  // mcp_session_expired_reason, then the transport closes.
  void session_expired(exchange& x, const std::string& detail);

  std::string http_error(const response& rx) const;

  // 401/403 with an authorization hook: ask it on the worker, then send
  // again or fail. True when handled here.
  bool unauthorized(std::shared_ptr<exchange> x, const response& rx,
                    bool get);

  void post_done(std::shared_ptr<exchange> x, response& rx,
                 const http_response_summary& sum);

  void get_done(std::shared_ptr<exchange> x, response& rx,
                const http_response_summary& sum);

  // -- reconnection (worker thread) ----------------------------------------

  milliseconds delay_for(const exchange& x) const;

  void resume(std::shared_ptr<exchange> x, const std::string& why) {
    ++x->failures; // reset when a resumed stream delivers events
    x->unreachable = false;
    reconnect(x, why);
  }

  void reconnect(std::shared_ptr<exchange> x, const std::string& why);

  void start_listening();

  // Runs `fn` on the worker thread after `delay` (never after close()).
  void post_task(milliseconds delay, std::function<void()> fn);

  void work();

  void stop_worker();

  // -- legacy SSE ------------------------------------------------------------

  // Opens the stream and waits for its `endpoint` event.
  status start_legacy(milliseconds timeout);

  // -- delivery ----------------------------------------------------------------

  void deliver(std::string msg) {
    if (h_.on_message && !closing_)
      h_.on_message(std::move(msg));
  }
  void closed(const std::string& why);

  mcp_http_settings s_;
  http_client& http_;
  handlers h_;

  std::mutex mtx_; // the fields up to inflight_
  std::condition_variable cv_;
  std::string session_id_;
  std::string version_;
  bool user_version_ = false;
  std::string endpoint_;
  bool stream_done_ = false;
  std::string stream_error_;
  std::set<http_request_id> inflight_;
  std::atomic<int> undelivered_{0}; // see mcp_transport::undelivered

  std::atomic<http_request_id> stream_id_{0};
  std::atomic<int> pending_callbacks_{0};
  std::atomic<bool> closing_{false};
  std::atomic<bool> closed_once_{false};
  std::atomic<bool> listening_{false};
  bool started_ = false;

  std::mutex wmtx_; // the worker's queue
  std::condition_variable wcv_;
  std::multimap<clock::time_point, std::function<void()>> tasks_;
  bool wstop_ = false;
  std::thread worker_;
};

} // namespace mibyan::mcp_http_detail
