// File: storage/response_record.hpp
//
// A stored response of the Responses API (docs/serve.md, "Responses API"):
// one row of the session store's `responses` database. The HTTP layer owns
// the meaning of `object_json` (the response object as the client got it);
// the store keeps it byte for byte with the session and the position in
// that session the response ended at, so `previous_response_id` can
// continue or branch the session from there.
//
// Encoding: a version byte, then varint-prefixed fields (as stored_message
// in storage/session_record.hpp); a reader refuses versions it does not
// know.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.hpp"

namespace mibyan {

struct stored_response {
  /// "resp_..." (at most session_store::max_id_bytes, [A-Za-z0-9_-]).
  std::string id;
  /// The session the response's turn ran in (a compression continuation
  /// when the turn compressed).
  std::string session_id;
  /// The id of the session's last message when the turn ended (0: none).
  uint64_t last_message_id = 0;
  /// Milliseconds since the epoch.
  int64_t created_at_ms = 0;
  /// The response object (JSON text).
  std::string object_json;
};

std::string encode_response(const stored_response& r);
/// False for truncated records and unknown versions.
bool decode_response(std::string_view bytes, stored_response& out);

/// Succeeds for a well-formed response id ("resp_" then 1..123 of
/// [A-Za-z0-9_-]), else invalid_argument with why not.
status check_response_id(std::string_view id);

} // namespace mibyan
