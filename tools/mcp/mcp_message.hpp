// File: tools/mcp/mcp_message.hpp
//
// The reading side of MCP's JSON-RPC (docs/mcp.md, "Transports"), CAF-free
// and pure: a stdio server's output split into message lines, and one
// message text (a message or a batch) classified into what the session
// acts on. Everything here takes untrusted server output: malformed input
// is classified `invalid` with a reason, never thrown.
//
// Thread safety: none; one owner (the transport's reader thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/json.hpp"
#include "base/status.hpp"
#include "kernels/line_splitter.hpp"

namespace mibyan {

/// One incoming JSON-RPC message.
struct mcp_incoming {
  enum class kind {
    invalid,      // not an object, or a reply without an integer id
    notification, // method, no id
    request,      // method and id: the server asks us
    reply,        // integer id, no method
  };
  kind k = kind::invalid;
  std::string method;   // notification, request
  json::value id;       // request (any JSON id), reply (integer)
  json::value params;   // request: the params object, or an empty object
  bool ok = false;      // reply: result present and no error
  json::value result;   // reply with ok
  std::string error;    // reply without ok: "MCP error CODE: text";
                        // invalid: why
};

/// Parses one message text: a single message or a batch (array), in
/// order. Fails with invalid_argument and the parser's message when the
/// text is no JSON; malformed messages inside valid JSON come back as
/// kind::invalid.
result<std::vector<mcp_incoming>> parse_mcp_messages(std::string_view text);

/// Classifies one parsed message.
mcp_incoming classify_mcp_message(const json::value& msg);

/// Splits a stdio server's output into message lines: a line whose first
/// non-blank character is '{' or '[' is a message (a trailing '\r' is
/// dropped); other non-blank lines are reported as skipped. A line longer
/// than `max_message` bytes fails the stream (feed returns false).
class mcp_line_reader {
public:
  using message_fn = std::function<void(std::string message)>;
  using skipped_fn = std::function<void(size_t bytes)>;

  explicit mcp_line_reader(size_t max_message) : lines_(max_message) {}

  bool feed(std::string_view chunk, const message_fn& on_message,
            const skipped_fn& on_skipped);

private:
  line_splitter lines_;
};

} // namespace mibyan
