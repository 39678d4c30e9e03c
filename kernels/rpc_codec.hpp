// File: kernels/rpc_codec.hpp
//
// Decoding and encoding of the kernel RPC lines (docs/kernel_protocol.md):
//   request  {"id": "<pid>-<seq>", "tool": NAME, "args": {...}, "token": T,
//             "cell": "<id of the cell the caller belongs to>"}
//   response {"id": "<same>" | null, "result": "<tool result JSON text>"}
// Pure functions; no I/O.
#pragma once

#include <string>
#include <string_view>

#include "base/status.hpp"

namespace mibyan {

struct rpc_request {
  std::string id;         // may be empty when the line was unparseable
  std::string tool;
  std::string args_json;  // the args object as JSON text
  std::string token;
  std::string cell;       // "" when the request names no cell
};

/// Decodes one request line into `out`. A malformed line is
/// invalid_argument, its message in the words shown to the script after
/// "Invalid RPC request: "; `out.id` then holds the line's id when the
/// line got as far as naming one (the refusal is sent to that id), and
/// the other members are unspecified.
status decode_rpc_request(std::string_view line, rpc_request& out);

/// Returns the request id of a line without parsing it, for refusing a
/// line too large to parse: the value of a leading `"id": "<text>"` member
/// (no escapes, at most 128 characters), else "".
std::string peek_rpc_id(std::string_view line);

/// Encodes a response line (with the trailing newline). An empty `id`
/// becomes null.
std::string encode_rpc_response(const std::string& id,
                                const std::string& result_json);

/// Encodes a bridge refusal: {"error": message} as the result.
std::string encode_rpc_error(const std::string& id, const std::string& message);

/// Compares two tokens in time independent of where they differ. An empty
/// expected token never matches (fail closed).
bool token_matches(std::string_view expected, std::string_view given);

} // namespace mibyan
