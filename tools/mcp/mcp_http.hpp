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
/// parser (base/sse_parser.hpp; an event without a name is
/// "message"), one callback per event. A line or event over `max_bytes`
/// fails the stream. Not thread-safe.
class mcp_sse_stream {
public:
  using event_fn = std::function<void(const std::string& event,
                                      std::string data)>;
  mcp_sse_stream(size_t max_bytes, event_fn fn)
    : parser_(max_bytes), fn_(std::move(fn)) {}
  /// False when the stream broke a limit.
  bool feed(std::string_view chunk);

private:
  sse_parser parser_;
  event_fn fn_;
  std::vector<sse_event> events_;
};

struct mcp_http_settings {
  std::string server;
  std::string url;
  std::vector<std::pair<std::string, std::string>> headers; // resolved
  bool sse = false;
  std::chrono::milliseconds connect_timeout{60000};
  size_t max_message_bytes = 16 << 20;
};

/// The Streamable HTTP or SSE transport (`settings.sse`).
std::unique_ptr<mcp_transport> make_mcp_http_transport(mcp_http_settings s,
                                                       http_client& http);

} // namespace mibyan
