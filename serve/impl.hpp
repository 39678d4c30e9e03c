// File: serve/impl.hpp
//
// Private to the serve/*.cpp files (it pulls
// in Asio; nothing else may include it): the shared state of a running
// server, its admission of connections and its disposal of stateless
// sessions.
#pragma once

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
#include <unordered_map>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>

#include "base/runtime_metrics.hpp"
#include "serve/http_server.hpp"
#include "serve/ui_auth.hpp"

namespace mibyan {

/// The server's io_context. Its queued handlers hold connections, and a
/// connection holds the server: a handler left in the queue when the I/O
/// threads stop would keep both alive for ever. `drop_pending` destroys
/// those handlers (Asio's own first step of ~io_context, the services'
/// shutdown); it runs once the I/O threads have been joined.
class server_io_context : public boost::asio::io_context {
public:
  void drop_pending() { shutdown(); }
};

/// A connection as admission sees it. Owned by the connection, held
/// weakly by the admission tables; `addr` and the callbacks are set before
/// `admit` and never change; the rest is guarded by the admission's mutex.
struct conn_ticket {
  /// The client's address (IPv4-mapped IPv6 as IPv4).
  std::string addr;
  uint64_t seq = 0;
  /// Reading a request head (the first one, or the next on a keep-alive
  /// connection): an eviction loses no request.
  bool waiting_head = true;
  bool evicted = false;
  /// Post to the connection's strand (never run inline): close it; give
  /// its head read at most `admission::pressure_header_timeout`.
  std::function<void()> evict;
  std::function<void()> hurry;
  /// Counts the connection open while it lives (docs/metrics.md).
  metrics::gauge_hold open{metrics::http_connections_open()};
};

/// Which connections are let in (serve/admission.cpp): at most
/// server.max_connections in all and server.max_connections_per_ip per
/// client address. At a limit the oldest connection (of that address, or
/// of all) still waiting for a request head is evicted to make room; when
/// there is none the new one is refused. From above 3/4 of
/// max_connections down to half of it the server is under pressure:
/// connections waiting for a head get at most one second more.
/// Thread-safe; the tickets' callbacks run without the lock held.
class admission {
public:
  static constexpr std::chrono::seconds pressure_header_timeout{1};

  explicit admission(const server_options& limits) : limits_(limits) {}

  /// Takes `t` in (true) or refuses it (false: close the socket).
  bool admit(const std::shared_ptr<conn_ticket>& t);
  /// The connection of `t` is gone.
  void release(conn_ticket& t);
  /// The connection of `t` starts (true) or ends (false) a head read.
  void set_waiting(conn_ticket& t, bool waiting);
  /// Under pressure (see above).
  bool under_pressure() const;

private:
  // The oldest live ticket of `m` waiting for a head (nullptr: none).
  std::shared_ptr<conn_ticket>
  oldest_waiting(const std::map<uint64_t, std::weak_ptr<conn_ticket>>& m);
  static int64_t
  waiting_count(const std::map<uint64_t, std::weak_ptr<conn_ticket>>& m);
  // Marks `t` evicted and drops it from the counts (lock held).
  void evict_locked(conn_ticket& t);

  const server_options& limits_;
  mutable std::mutex mtx_;
  // Live, not evicted connections: by address, and all of them; both in
  // accept order.
  std::unordered_map<std::string,
                     std::map<uint64_t, std::weak_ptr<conn_ticket>>>
    by_addr_;
  std::map<uint64_t, std::weak_ptr<conn_ticket>> all_;
  uint64_t next_seq_ = 0;
  bool pressure_ = false;
};

struct http_server::impl : std::enable_shared_from_this<http_server::impl> {
  runtime& rt;
  http_server_settings cfg;
  server_io_context ioc;
  boost::asio::ip::tcp::acceptor acceptor{ioc};
  std::vector<std::thread> threads;
  // Store reads and deletes run here, never on an I/O thread.
  boost::asio::thread_pool store_pool{1};
  admission gate{cfg.limits};
  std::atomic<int64_t> turns{0};
  std::atomic<bool> stopping{false};
  bool stopped = false; // guarded by mtx
  // The store thread is joined (or about to be): nothing more is posted
  // to it. Guarded by mtx.
  bool store_closed = false;
  // Running turns by session (for shutdown interrupts); responses still
  // being produced (turns and store calls), for the graceful wait.
  std::mutex mtx;
  std::condition_variable cv;
  std::multiset<std::string> running;
  int64_t busy = 0;
  // Kept sessions (X-Mibyan-Session) by the end of their last turn; their
  // conversations are closed after server.session_idle_timeout.
  std::map<std::string, std::chrono::steady_clock::time_point> kept;
  // Stateless sessions (no X-Mibyan-Session) not yet deleted from the
  // store: their turns run or their deletion is queued.
  std::set<std::string> stateless;
  // Stored responses (Responses API, store: true) not yet in the store:
  // their turn runs (`done` false; the object is in_progress) or their
  // record is queued on the store thread (the final object). GET answers
  // from here first (serve/responses_route.cpp).
  struct live_response {
    bool done = false;
    std::string object_json;
  };
  std::map<std::string, live_response> live_responses;
  boost::asio::steady_timer reaper{ioc};
  // The dashboard's security layer; made in start() once the port is
  // bound.
  std::unique_ptr<serve::ui_auth> ui_auth;
  std::mutex io_mtx;
  bool io_closed = false; // guarded by io_mtx

  impl(runtime& r, http_server_settings s) : rt(r), cfg(std::move(s)) {}

  void begin_busy() {
    std::lock_guard<std::mutex> g{mtx};
    ++busy;
  }
  void end_busy() {
    std::lock_guard<std::mutex> g{mtx};
    --busy;
    cv.notify_all();
  }

  /// Posts `f` to `ex` unless the I/O has ended (`close_io`); a refused
  /// `f` is destroyed here, with what it holds. For completions that come
  /// from runtime threads (turn results, stream deltas), which may arrive
  /// after the server stopped.
  template <class Executor, class F>
  void post_if_open(const Executor& ex, F&& f) {
    std::lock_guard<std::mutex> g{io_mtx};
    if (!io_closed)
      boost::asio::post(ex, std::forward<F>(f));
  }

  /// After the I/O threads are joined: refuses later posts and destroys the
  /// handlers still queued.
  void close_io() {
    {
      std::lock_guard<std::mutex> g{io_mtx};
      io_closed = true;
    }
    ioc.drop_pending();
  }

  // Starts the next asynchronous accept.
  void accept();

  /// A stateless turn of `root` ended (however: answered, failed,
  /// interrupted): on the store thread, closes its conversation and
  /// deletes the session with its descendants (compression continuations,
  /// subagents), then runs `then` (serve/stateless.cpp). Any thread.
  void discard_stateless(const std::string& root, std::function<void()> then);
  /// At shutdown, after the store thread is joined: deletes the stateless
  /// sessions still left (turns that outlived the grace period).
  void discard_remaining_stateless();
  /// A new stateless session id: `new_session_id()` + "@<pid>", so that a
  /// later server can tell whose leftovers it finds.
  std::string stateless_id() const;
  /// At start, on the store thread: deletes the stateless sessions (source
  /// api-stateless, "@<pid>" id) of server processes that no longer run (a
  /// process killed mid-turn).
  void sweep_stateless_leftovers();

  // Every tick: closes the conversations (and kernels) of kept sessions
  // idle longer than server.session_idle_timeout; the store keeps them,
  // the next turn reloads the history.
  void reap();
};

/// Serves one accepted socket (serve/connection.cpp) until it closes.
void start_connection(std::shared_ptr<http_server::impl> srv,
                      boost::asio::ip::tcp::socket sock);

} // namespace mibyan
