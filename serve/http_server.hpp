// File: serve/http_server.hpp
//
// The HTTP API of a Mibyan node (`mibyan serve`, docs/serve.md): an
// OpenAI-compatible chat endpoint, models, health and session endpoints,
// served with Boost.Beast on Asio. Beast and Asio stay inside
// serve/http_server.cpp; this header is light.
//
// Threads: `io_threads` Asio threads run every connection, each on its own
// strand. Turns run on the runtime's actors through
// `runtime::run_turn_async`; their callbacks only post to the connection's
// strand, so neither the I/O threads nor CAF's scheduler ever block on a
// turn. Session-store calls run on one extra thread of the server.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "base/status.hpp"
#include "config/options.hpp"
#include "runtime/runtime.hpp"
#include "serve/ui_ops.hpp"

namespace mibyan {

/// What the server needs to know besides the runtime.
struct http_server_settings {
  /// Address and port to bind (port 0: any free port).
  std::string host = "127.0.0.1";
  uint16_t port = 8642;
  /// The bearer key ("" = no authentication).
  std::string key;
  /// Limits and timeouts (`server:` section).
  server_options limits;
  /// The turn template: provider, model, base URL, key, toolsets,
  /// iterations. Its session id and prompt are ignored.
  turn_call turn;
  /// The model id clients send and see in /v1/models.
  std::string model_id;
  /// Returns a new session id for a stateless request (the server appends
  /// "@<pid>" to it).
  std::function<std::string()> new_session_id;
  /// The operator endpoints' hooks (serve/ui_ops.hpp): the node id of a
  /// cluster member and its cluster view.
  serve::ui_ops_hooks ui;
  /// Set by `mibyan dashboard --connect`: every /ui/api/* request but
  /// login, logout and whoami is answered by this (forwarded to a cluster
  /// gateway) instead of this node's runtime; /ui/api/live becomes a
  /// polled snapshot. `done` once, any thread.
  std::function<void(serve::ops_request, serve::ops_done)> ui_forward;
  /// The configuration the node runs with, for GET /ui/api/config (shown
  /// masked); nullptr: that endpoint answers 503.
  std::shared_ptr<const options> effective;
};

class http_server {
public:
  /// Binds, starts the I/O threads and returns the running server. Fails
  /// with config_invalid for `limits` outside the ranges of the server
  /// section (validate_options, naming the key), invalid_argument for a
  /// bad listen address, else with the socket error's code (unavailable for
  /// an address in use, permission_denied for a privileged port).
  static result<std::unique_ptr<http_server>>
  start(runtime& rt, http_server_settings settings);

  /// The bound address and port.
  std::string host() const;
  uint16_t port() const;

  /// Graceful stop: closes the listener, interrupts running turns (they
  /// are persisted and their clients get an answer), waits for them at
  /// most `grace`, then stops the I/O threads. Idempotent.
  void shutdown(std::chrono::milliseconds grace);

  /// Calls shutdown with a short grace.
  ~http_server();

  http_server(const http_server&) = delete;
  http_server& operator=(const http_server&) = delete;

  struct impl;

private:
  explicit http_server(std::shared_ptr<impl> p);
  std::shared_ptr<impl> impl_;
};

/// Compares two strings in time that depends only on their lengths.
bool constant_time_equal(const std::string& a, const std::string& b);

} // namespace mibyan
