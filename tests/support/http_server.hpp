// File: tests/support/http_server.hpp
//
// A scripted HTTP server for tests: runs tests/support/http_server.py with
// python3 as a child process on 127.0.0.1 with an ephemeral port, and kills
// it on destruction. See the script's docstring for the routes.
//
// The control helpers (`script`, `requests`, `reset`) talk to the server
// with a tiny blocking socket client of their own, so they never depend on
// the HTTP client under test.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <sys/types.h>

namespace mibyan::test {

class http_server {
public:
  /// Starts the server and waits (at most 10 s) for its port. Throws
  /// std::runtime_error when it cannot be started.
  http_server();

  /// Kills the server (SIGKILL) and reaps it.
  ~http_server();

  http_server(const http_server&) = delete;
  http_server& operator=(const http_server&) = delete;

  uint16_t port() const { return port_; }

  /// Returns "http://127.0.0.1:<port>" + path (path should start with '/').
  std::string url(std::string_view path = "/") const;

  /// Queues a scripted response: `spec_json` is the JSON object accepted by
  /// the /__script route, e.g. {"path":"/x","status":500,"body":"no"}.
  void script(const std::string& spec_json) const;

  /// Queues a 200 answer with `body` to /v1/chat/completions, served
  /// `times` times, each after `delay_ms`.
  void script_chat(const std::string& body, int times = 1,
                   int delay_ms = 0) const;

  /// Returns the JSON text of the request log (/__requests).
  std::string requests() const;

  /// Clears the request log and the scripts.
  void reset() const;

  /// Sends one request with the built-in socket client and returns the
  /// response body ("" on failure).
  std::string control(const std::string& method, const std::string& path,
                      const std::string& body = {}) const;

private:
  pid_t pid_ = -1;
  uint16_t port_ = 0;
};

} // namespace mibyan::test
