// File: tests/support/mcp_oauth_fixture.hpp
//
// For tests/mcp_oauth_test.cpp: our OAuth authorization server + protected
// MCP server (tests/support/mcp_oauth_server.py) as a child process, and a
// `mibyan mcp login` child whose stdout is read while it runs, so the test
// can play the browser.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "base/json.hpp"

namespace mibyan::test {

class oauth_test_server {
public:
  /// Starts the server and waits (at most 10 s) for its port. Throws
  /// std::runtime_error when it cannot be started.
  oauth_test_server();
  ~oauth_test_server(); // SIGKILL + reap
  oauth_test_server(const oauth_test_server&) = delete;
  oauth_test_server& operator=(const oauth_test_server&) = delete;

  int port() const { return port_; }
  std::string url(const std::string& path) const;
  /// POST /__config with `json` (merged into the server's settings).
  void configure(const std::string& json) const;
  /// GET /__state.
  json::value state() const;

private:
  int pid_ = -1;
  int port_ = 0;
};

/// A child process whose stdout and stderr are collected while it runs.
class running_child {
public:
  running_child(const std::vector<std::string>& argv,
                const std::map<std::string, std::string>& env);
  ~running_child(); // SIGKILL + reap when still running
  running_child(const running_child&) = delete;
  running_child& operator=(const running_child&) = delete;

  /// Reads until stdout holds a line starting with `prefix` (after leading
  /// spaces) and returns that line trimmed; "" when the child exited or
  /// `limit` passed first.
  std::string wait_for_line(const std::string& prefix,
                            std::chrono::milliseconds limit);
  /// Waits for the exit (killing the child after `limit`): the exit code,
  /// -N for signal N.
  int wait(std::chrono::milliseconds limit);
  const std::string& out() const { return out_; }
  const std::string& err() const { return err_; }

private:
  bool pump(std::chrono::milliseconds limit); // false: both pipes closed
  int pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  int exit_ = -1000;
  std::string out_;
  std::string err_;
};

/// A GET that follows redirects, as a browser would; returns the final
/// status (0 when no response) and the body in `body`.
long browser_get(const std::string& url, std::string* body = nullptr);

} // namespace mibyan::test
