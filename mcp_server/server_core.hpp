// File: mcp_server/server_core.hpp
//
// The transport-free MCP server of `mibyan mcp serve` (docs/mcp.md,
// "Mibyan as an MCP server"): sessions and the JSON-RPC dispatch of the
// 2025-11-25 revision (also 2025-06-18): initialize with version
// negotiation, ping, tools/list (paged), tools/call through the backend
// (mcp_server/backend.hpp) with text and structured content and isError,
// progress heartbeats for calls that carry a progressToken,
// notifications/cancelled, logging/setLevel with notifications/message,
// notifications/tools/list_changed when the offered tools change,
// resources (read-only session transcripts) when the backend offers them,
// and server-to-client requests (elicitation/create) for approvals and
// clarify questions.
//
// A transport (stdio_transport, http_transport) opens a session with an
// `outbound` function and feeds it the client's messages; everything the
// server sends for that session (responses, notifications, requests) goes
// through that function.
//
// Threads: every public function may be called from any thread. `handle`
// never blocks (tool calls and store reads run elsewhere); `outbound` is
// called from transport threads, runtime threads, the core's ticker thread
// and blocking-pool threads (approval prompts), never under a lock of the
// core, possibly concurrently for one session: it must be thread-safe and
// must not block.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/json.hpp"
#include "mcp_server/backend.hpp"

namespace mibyan {

/// The protocol revisions this server speaks, newest first.
const std::vector<std::string>& mcp_server_protocol_versions();

/// JSON-RPC error codes the server answers with.
namespace mcp_errors {
constexpr int parse_error = -32700;
constexpr int invalid_request = -32600;
constexpr int method_not_found = -32601;
constexpr int invalid_params = -32602;
constexpr int internal_error = -32603;
constexpr int resource_not_found = -32002;
} // namespace mcp_errors

/// A JSON-RPC error response text for `id` (null when unknown).
std::string mcp_error_response(const json::value& id, int code,
                               const std::string& message);

struct mcp_core_settings {
  /// serverInfo.
  std::string name = "mibyan";
  std::string version;
  /// tools/list and resources/list page size.
  size_t page_size = 50;
  /// A message larger than this is refused (the transports cap it first).
  size_t max_message_bytes = size_t{4} << 20;
  /// How often a running call that carries a progressToken gets a
  /// notifications/progress heartbeat.
  std::chrono::milliseconds progress_interval{2000};
  /// How often the offered tools are compared with the last list.
  std::chrono::milliseconds list_check_interval{2000};
  /// A session idle (no message, no running call) this long is closed;
  /// zero: never (stdio).
  std::chrono::seconds idle_timeout{0};
  /// Open sessions at most; open_session refuses more.
  size_t max_sessions = 1024;
  /// Prefix of the Mibyan session ids of MCP sessions.
  std::string session_prefix = "mcp_";
};

/// Where one message of a session goes: `related` is the id of the
/// client's request it belongs to (null for none), `final` marks the
/// response to that request (the last message of its exchange).
using mcp_outbound = std::function<void(const std::string& text,
                                        const json::value& related,
                                        bool final)>;

class mcp_server_core : public std::enable_shared_from_this<mcp_server_core> {
public:
  /// One MCP session (one client connection over stdio; one
  /// Mcp-Session-Id over HTTP).
  struct session;

  static std::shared_ptr<mcp_server_core> create(mcp_backend backend,
                                                 mcp_core_settings settings);
  ~mcp_server_core();
  mcp_server_core(const mcp_server_core&) = delete;
  mcp_server_core& operator=(const mcp_server_core&) = delete;

  /// Opens a session with a fresh random id (not yet initialized); null
  /// when `max_sessions` are open.
  std::shared_ptr<session> open_session(mcp_outbound out);
  /// The open session `id`, or null.
  std::shared_ptr<session> find_session(const std::string& id) const;
  /// Ends a session: its running calls are interrupted (no responses are
  /// sent for them), waiting elicitations answer deny, its channels are
  /// cleared and its Mibyan session closed. False for an unknown id.
  bool close_session(const std::string& id, const std::string& why);
  /// Replaces a session's outbound function (nullptr: drop messages).
  void set_outbound(const std::shared_ptr<session>& s, mcp_outbound out);

  /// Handles one message text (one JSON-RPC message). Garbage, batches
  /// and oversized text get an error response with a null id.
  void handle_text(const std::shared_ptr<session>& s, std::string_view text);
  /// Handles one parsed message.
  void handle(const std::shared_ptr<session>& s, const json::value& msg);

  /// Sends an error response with a null id (a message the transport
  /// refused before parsing, e.g. an oversized one).
  void reject(const std::shared_ptr<session>& s, int code,
              const std::string& message);

  /// The client stopped waiting for request `id` (its HTTP stream closed):
  /// as notifications/cancelled, the call is interrupted and no response
  /// is sent.
  void abandon_request(const std::shared_ptr<session>& s,
                       const json::value& id, const std::string& why);

  /// The session's id (Mcp-Session-Id) and its Mibyan session id.
  static const std::string& id_of(const session& s);
  static const std::string& mibyan_id_of(const session& s);
  /// Whether initialize completed for the session.
  static bool initialized(const session& s);
  /// The negotiated protocol version ("" before initialize).
  static std::string protocol_version_of(const session& s);

  /// Open sessions and running calls (for tests and logs).
  size_t session_count() const;
  size_t running_calls() const;

  /// Stops the ticker and closes every session. Idempotent.
  void shutdown();

private:
  mcp_server_core(mcp_backend backend, mcp_core_settings settings);
  struct impl;
  std::unique_ptr<impl> p_;
};

} // namespace mibyan
