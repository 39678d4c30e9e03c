// File: tests/support/kernel_rpc_server.hpp
//
// A minimal host side of the mibyan_tools RPC protocol for tests: listens on
// a Unix socket, accepts any number of connections (one thread each), reads
// request lines, checks the token and answers `{"id", "result"}` lines.
// Records every request. Its behaviour is chosen per test through
// `fake_rpc_options` (hold and reorder replies, drop the connection after a
// request, custom results). Thread-safe accessors.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/json.hpp"

namespace mibyan::test {

struct fake_rpc_request {
  /// 1-based index of the connection, in accept order.
  int connection = 0;
  /// The line as received (without "\n").
  std::string line;
  /// The parsed line (null when it was not JSON).
  json::value msg;
};

struct fake_rpc_options {
  /// Expected MIBYAN_RPC_TOKEN; a mismatch is answered with
  /// {"error": "Unauthorized RPC request"}.
  std::string token;
  /// Hold replies until this many requests arrived, then send them in
  /// reverse arrival order (0: answer at once).
  size_t hold = 0;
  /// Close the connection right after reading a request, without a reply.
  bool close_after_read = false;
  /// Close the connection right after answering a request.
  bool close_after_reply = false;
  /// Returns the result JSON text for a request. Default: an object echoing
  /// {"tool", "args", "connection"}.
  std::function<std::string(const fake_rpc_request&)> answer;
};

class fake_rpc_server {
public:
  /// Listens on `path`; throws std::runtime_error on failure.
  fake_rpc_server(std::string path, fake_rpc_options opts);
  /// Stops accepting, closes all connections and joins all threads.
  ~fake_rpc_server();
  fake_rpc_server(const fake_rpc_server&) = delete;
  fake_rpc_server& operator=(const fake_rpc_server&) = delete;

  const std::string& path() const { return path_; }

  /// Returns a copy of the requests received so far.
  std::vector<fake_rpc_request> requests() const;

  /// Returns the number of accepted connections.
  int connections() const { return connections_.load(); }

private:
  void accept_loop();
  void serve(int fd, int index);
  void handle(int fd, fake_rpc_request req);
  void write_line(int fd, const std::string& line);

  std::string path_;
  fake_rpc_options opts_;
  int listen_fd_ = -1;
  int stop_pipe_[2] = {-1, -1};
  std::atomic<int> connections_{0};
  mutable std::mutex mtx_;
  std::vector<fake_rpc_request> requests_;
  std::vector<std::pair<int, std::string>> held_;
  std::vector<int> conn_fds_;
  std::vector<std::thread> threads_;
  std::thread acceptor_;
};

} // namespace mibyan::test
