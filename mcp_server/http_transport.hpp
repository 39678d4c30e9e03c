// File: mcp_server/http_transport.hpp
//
// The Streamable HTTP transport of `mibyan mcp serve --listen HOST:PORT`
// (MCP 2025-11-25 basic/transports), a small Boost.Beast server of its own
// (Beast and Asio stay in the .cpp files). One endpoint (`path`, /mcp):
//   POST    one JSON-RPC message. A request is answered with
//           application/json when its response is the first thing the
//           server has for it, else with a text/event-stream carrying the
//           messages that belong to it (progress, log messages,
//           elicitation requests) and ending with the response. A
//           notification or a response gets 202 with no body. initialize
//           opens a session and returns its Mcp-Session-Id; every other
//           message must carry it (missing: 400, unknown or ended: 404).
//   GET     the session's stream of server-initiated messages (list
//           changed, messages for requests whose stream closed); events
//           carry ids, and a GET with Last-Event-ID replays the later ones.
//   DELETE  ends the session (204).
// Checked on every request: Origin (a browser's request from a page not
// on a loopback or allowed host is refused with 403: DNS rebinding), the
// bearer key when one is set (401), MCP-Protocol-Version when present
// (400 for an unsupported one), the body size (413).
//
// Sessions live in the core, not in a connection: a client may close its
// connection and continue the session on another one with the same
// Mcp-Session-Id. A POST stream that closes before its response is the
// client leaving that request: the call is interrupted (the core sends no
// response).
//
// Threads: `io_threads` Asio threads; each connection on its own strand.
// The core's outbound messages (any thread) only post to strands.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.hpp"
#include "mcp_server/server_core.hpp"

namespace mibyan {

struct mcp_http_settings {
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  std::string path = "/mcp";
  /// The bearer key ("" = none; refused off loopback by the command).
  std::string key;
  /// Host names (or host:port) accepted in an Origin header besides the
  /// loopback names and the listen address.
  std::vector<std::string> allowed_hosts;
  size_t max_message_bytes = size_t{4} << 20;
  int io_threads = 2;
  /// Seconds a client has to send a request's head and body.
  int64_t request_timeout_s = 30;
  /// Seconds between ": keep-alive" comments on an idle event stream.
  int64_t keepalive_s = 15;
  /// Events kept per session for replay to a GET with Last-Event-ID.
  size_t replay_events = 256;
  /// Open connections at once; over it new ones are closed.
  size_t max_connections = 1024;
};

class mcp_http_server {
public:
  /// Binds and starts serving. Fails with invalid_argument for a bad listen
  /// address, else with the socket error's code (unavailable for an
  /// address in use).
  static result<std::unique_ptr<mcp_http_server>>
  start(std::shared_ptr<mcp_server_core> core, mcp_http_settings settings);

  std::string host() const;
  uint16_t port() const;

  /// Stops accepting, closes every connection and stops the threads.
  /// Idempotent. The core's sessions stay (shut the core down after).
  void shutdown();
  ~mcp_http_server();

  mcp_http_server(const mcp_http_server&) = delete;
  mcp_http_server& operator=(const mcp_http_server&) = delete;

  struct impl;

private:
  explicit mcp_http_server(std::shared_ptr<impl> p);
  std::shared_ptr<impl> p_;
};

} // namespace mibyan
