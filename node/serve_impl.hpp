// File: node/serve_impl.hpp
//
// Private to node/http_server.cpp and node/serve_connection.cpp (it pulls
// in Asio and Beast; nothing else may include it): the shared state of a
// running server.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>

#include "node/http_server.hpp"

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

struct http_server::impl : std::enable_shared_from_this<http_server::impl> {
  runtime& rt;
  http_server_settings cfg;
  server_io_context ioc;
  boost::asio::ip::tcp::acceptor acceptor{ioc};
  std::vector<std::thread> threads;
  // Store reads and deletes run here, never on an I/O thread.
  boost::asio::thread_pool store_pool{1};
  std::atomic<int64_t> connections{0};
  std::atomic<int64_t> turns{0};
  std::atomic<bool> stopping{false};
  bool stopped = false; // guarded by mtx
  // Running turns by session (for shutdown interrupts); responses still
  // being produced (turns and store calls), for the graceful wait.
  std::mutex mtx;
  std::condition_variable cv;
  std::multiset<std::string> running;
  int64_t busy = 0;
  // Kept sessions (X-Mibyan-Session) by the end of their last turn; their
  // conversations are closed after server.session_idle_timeout.
  std::map<std::string, std::chrono::steady_clock::time_point> kept;
  boost::asio::steady_timer reaper{ioc};
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

  // Every tick: closes the conversations (and kernels) of kept sessions
  // idle longer than server.session_idle_timeout; the store keeps them,
  // the next turn reloads the history.
  void reap();
};

/// Serves one accepted socket (node/serve_connection.cpp) until it closes.
void start_connection(std::shared_ptr<http_server::impl> srv,
                      boost::asio::ip::tcp::socket sock);

} // namespace mibyan
