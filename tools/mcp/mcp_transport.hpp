// File: tools/mcp/mcp_transport.hpp
//
// How JSON-RPC messages travel between Mibyan and one MCP server
// (docs/mcp.md, "Transports"): a stdio child process, Streamable HTTP or
// legacy SSE. A transport only moves message texts; ids, the handshake and
// timeouts belong to the session (tools/mcp/mcp_session.hpp).
//
// Threads: `on_message` and `on_closed` run on the transport's own thread
// (the stdio reader thread or the HTTP client thread). They must be quick
// and must not call back into the transport's close(). `send` may be
// called from any thread; it does not wait for a reply.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "base/status.hpp"
#include "config/mcp_options.hpp"

namespace mibyan {

struct options;
class http_client;

/// Names an HTTP server's answer of 404 (or a 400 naming the session) to a
/// request carrying the session id: the session is gone server-side and a
/// new initialize is due. It starts the on_closed reason, and the error
/// that request itself gets: nothing of that request ran, so it may be sent
/// again. Requests failed by the close ("connection lost: ...") may have
/// run and are not.
constexpr const char* mcp_session_expired_reason =
  "the server no longer knows the session";

class mcp_transport {
public:
  struct handlers {
    /// One JSON-RPC message (or batch) as text.
    std::function<void(std::string message)> on_message;
    /// The connection ended (process exit, stream end, protocol breach).
    /// Called at most once, never after close() returned.
    std::function<void(std::string reason)> on_closed;
  };

  virtual ~mcp_transport() = default;

  /// Starts the process / opens the stream. Fails with `unavailable`
  /// (spawn failure, connection refused) or `timeout`.
  virtual status start(handlers h, std::chrono::milliseconds timeout) = 0;

  /// Sends one message. Fails with `unavailable` when the connection is
  /// gone. For HTTP the reply arrives later through on_message.
  virtual status send(const std::string& message) = 0;

  /// Ends the connection: stdio kills the process group (SIGTERM, then
  /// SIGKILL) and joins the reader; HTTP ends the session. Idempotent.
  virtual void close() = 0;

  /// The last few KiB the server wrote to stderr (stdio), for reports.
  virtual std::string stderr_tail() const { return {}; }

  /// The protocol version the session negotiated; HTTP requests carry it
  /// from now on. Other transports ignore it.
  virtual void set_protocol_version(const std::string&) {}

  /// The child's pid (= process group) or -1.
  virtual int pid() const { return -1; }

  /// Messages without a reply of their own (responses, notifications)
  /// sent but not yet accepted by the server: HTTP counts their POSTs in
  /// flight; stdio writes in order and has none.
  virtual int undelivered() const { return 0; }

  /// Blocks the calling thread until undelivered() is 0 or `timeout`
  /// passes (then `timeout`). The handshake waits here after
  /// `notifications/initialized`, so no request overtakes it.
  virtual status drain(std::chrono::milliseconds) { return {}; }
};

/// Builds the transport `s.transport` names. `cfg` resolves ${VAR}
/// references and gives $MIBYAN_HOME (stderr log); `http` is needed for
/// http/sse (null: those fail to start).
std::unique_ptr<mcp_transport> make_mcp_transport(const mcp_server_options& s,
                                                  const options& cfg,
                                                  http_client* http);

/// The environment of a stdio server: PATH, HOME, USER, LANG, LC_ALL, TERM,
/// SHELL, TMPDIR and XDG_* of `host` ("NAME=value"), then `extra`.
std::vector<std::string>
mcp_stdio_environment(const std::vector<std::string>& host,
                      const std::vector<std::pair<std::string, std::string>>&
                        extra);

} // namespace mibyan
