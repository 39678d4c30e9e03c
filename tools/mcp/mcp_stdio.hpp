// File: tools/mcp/mcp_stdio.hpp
//
// The stdio transport: the server is a child process (its own process
// group, scrubbed environment), one JSON-RPC message per line on its stdin
// and stdout. One reader thread per server polls stdout, stderr and a wake
// pipe, so no caller ever blocks on the child's output. stderr is appended
// to $MIBYAN_HOME/logs/mcp-stderr.log (at most `stderr_log_cap` bytes per
// process) and its last 4 KiB are kept for error reports. A stdout line
// longer than `max_message_bytes` ends the connection (the peer broke the
// protocol; its pending calls fail); lines that are not JSON are skipped
// and logged.
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tools/mcp/mcp_transport.hpp"

namespace mibyan {

class mcp_stdio_transport : public mcp_transport {
public:
  struct settings {
    std::string server;                 // for log lines
    std::vector<std::string> argv;
    std::vector<std::string> env;       // "NAME=value"
    std::string cwd;
    std::string stderr_log;             // "" = none
    size_t max_message_bytes = 16 << 20;
    size_t stderr_log_cap = 8 << 20;
  };

  explicit mcp_stdio_transport(settings s);
  ~mcp_stdio_transport() override;

  status start(handlers h, std::chrono::milliseconds timeout) override;
  status send(const std::string& message) override;
  void close() override;
  std::string stderr_tail() const override;
  int pid() const override { return pid_.load(); }

private:
  void reader_loop();
  void on_stderr(const char* data, size_t n);
  void stop_child();

  settings s_;
  handlers h_;
  std::atomic<int> pid_{-1};
  int in_fd_ = -1;  // our end of the child's stdin (a socket: MSG_NOSIGNAL)
  int out_fd_ = -1;
  int err_fd_ = -1;
  int wake_r_ = -1;
  int wake_w_ = -1;
  std::thread reader_;
  std::mutex send_mtx_;
  mutable std::mutex err_mtx_;
  std::string err_tail_;
  size_t err_logged_ = 0;
  int log_fd_ = -1;
  std::atomic<bool> closing_{false};
};

} // namespace mibyan
