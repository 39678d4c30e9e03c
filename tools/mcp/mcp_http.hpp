// File: tools/mcp/mcp_http.hpp
//
// The remote transports of MCP (docs/mcp.md, "Transports"), both on the
// runtime's one curl-multi thread (base/http_client.hpp):
//
// - Streamable HTTP: every message is a POST with
//   `Accept: application/json, text/event-stream`; the reply is either one
//   JSON body or an SSE stream of messages. The `Mcp-Session-Id` the server
//   assigns is sent back on every later request, and
//   `MCP-Protocol-Version` once negotiated (unless the user set it). A
//   failed POST for a request becomes a JSON-RPC error reply for its id.
//   After initialize a GET stream carries server-initiated messages
//   (unless the server answers 405). SSE event ids are tracked per stream:
//   a stream that breaks before it is done (a POST's stream before its
//   reply, or the GET stream) is resumed with a GET carrying
//   `Last-Event-ID`, after the server's `retry` or a bounded backoff.
//   A 404 on a request carrying the session id means the server forgot
//   the session: the transport reports it closed with
//   mcp_session_expired_reason and the session initializes afresh.
//   close() ends the session with DELETE.
// - Legacy SSE: a long-lived GET stream whose first `endpoint` event names
//   the URL messages are POSTed to; replies arrive as `message` events.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "base/sse_parser.hpp"
#include "tools/mcp/mcp_transport.hpp"

namespace mibyan {

/// A Server-Sent-Events response stream of an MCP server: the shared SSE
/// parser (base/sse_parser.hpp; an event without a name is "message"),
/// one callback per event (with the last event id seen). A line or event
/// over `max_bytes` fails the stream; a callback returning false stops it.
/// Not thread-safe.
class mcp_sse_stream {
public:
  using event_fn = std::function<bool(const sse_event& e)>;
  mcp_sse_stream(size_t max_bytes, event_fn fn)
    : parser_(max_bytes), fn_(std::move(fn)) {}
  /// False when the stream broke a limit or a callback stopped it.
  bool feed(std::string_view chunk);
  /// Why the parser failed ("" when it did not).
  const std::string& error() const { return parser_.error(); }
  /// The server's last `retry` in milliseconds, -1 when none came.
  int64_t retry_ms() const { return parser_.retry_ms(); }

private:
  sse_parser parser_;
  event_fn fn_;
  std::vector<sse_event> events_;
};

/// Authorization hooks of one HTTP connection (docs/mcp.md,
/// "Authorization"); both optional. Set by whoever builds the settings
/// (make_mcp_transport), one instance per connection.
struct mcp_http_auth {
  /// The bearer token for the next request; "" sends no Authorization
  /// header. When it returns a token, a configured `Authorization` header
  /// is replaced. Called before every request (POST, GET stream, resume,
  /// DELETE) on the sending thread, which may be the HTTP client thread
  /// (a reply the session sends from a transport callback): it must return
  /// at once from memory, without network I/O.
  std::function<std::string()> bearer;
  /// The server answered 401 or 403 (`status`) with this
  /// `WWW-Authenticate` header ("" when absent). Returns true when a new
  /// token is available: the request is then sent once more (bearer()
  /// asked again). Runs on the transport's worker thread, never on the
  /// HTTP client thread; it may block for network I/O (refresh) but must
  /// return within its own bound. false: a request fails with the HTTP
  /// status and the header as its error, a GET stream stays closed.
  std::function<bool(int status, const std::string& www_authenticate)>
    on_unauthorized;
};

struct mcp_http_settings {
  std::string server;
  std::string url;
  std::vector<std::pair<std::string, std::string>> headers; // resolved
  bool sse = false;
  std::chrono::milliseconds connect_timeout{60000};
  size_t max_message_bytes = 16 << 20;
  mcp_http_auth auth;
  /// Streamable HTTP: open the GET stream for server-initiated messages
  /// once the session is initialized (a server answering 405 has none).
  bool listen = true;
  /// Reconnection of a broken SSE stream (GET stream, or a POST's stream
  /// before its reply) when the server sent no `retry`: the first wait,
  /// doubled per failed attempt up to `reconnect_max_delay`; after
  /// `reconnect_attempts` failed attempts in a row the stream is given up
  /// (a POST's request then fails; the GET stream reopens at the next
  /// initialize). A POST's stream whose server stays unreachable (no HTTP
  /// response) ends the connection instead (the session reconnects).
  std::chrono::milliseconds reconnect_delay{500};
  std::chrono::milliseconds reconnect_max_delay{30000};
  int reconnect_attempts = 3;
  /// Observer (tests): called when a reconnection is scheduled (on the
  /// HTTP client thread: quick) with what reconnects ("get" or "resume")
  /// and the delay it waits first (the server's `retry` when it sent one).
  std::function<void(const std::string& what, std::chrono::milliseconds)>
    on_reconnect_wait;
};

/// The Streamable HTTP or SSE transport (`settings.sse`).
std::unique_ptr<mcp_transport> make_mcp_http_transport(mcp_http_settings s,
                                                       http_client& http);

} // namespace mibyan
