// File: storage/session_record.hpp
//
// The records the session store keeps, and their encodings:
//   * session_info: one row of the `sessions` database, stored as a JSON
//     object (fields can be added without a migration; unknown fields are
//     ignored when reading);
//   * stored_message: one row of the `msgs` database, in a compact binary
//     form (version byte, then varint-prefixed fields) so content is kept
//     byte for byte and large transcripts load quickly. Tool calls are kept
//     as the JSON text [{"id","type":"function","function":{"name",
//     "arguments"}}].
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.hpp"
#include "messages/chat.hpp"

namespace mibyan {

/// A session row.
struct session_info {
  /// `YYYYMMDD_HHMMSS_<6 hex>` unless the creator supplied one.
  std::string id;
  /// cli, api, cron, tool, or a chat platform name.
  std::string source;
  std::string model;
  std::string provider;
  std::string cwd;
  std::string title;
  /// The session this one continues (compression) or branched from.
  std::string parent_session_id;
  /// What the creator recorded with the session: a JSON object as text,
  /// "" when none (e.g. {"cron_job_id","cron_run_id"} for a scheduled run).
  std::string metadata_json;
  /// Milliseconds since the epoch; `ended_at_ms` is 0 while open.
  int64_t started_at_ms = 0;
  int64_t ended_at_ms = 0;
  /// Why it ended ("compression" marks a chain link); "" while open.
  std::string end_reason;
  int64_t message_count = 0;
  int64_t tool_call_count = 0;
  int64_t api_call_count = 0;
  token_usage tokens;
};

/// A message row as stored.
struct stored_message {
  /// Global, strictly increasing; defines order.
  uint64_t id = 0;
  std::string session_id;
  /// The caller's idempotency key ("" when none was given).
  std::string key;
  chat_message message;
};

std::string encode_session(const session_info& s);
/// The session object in `text`; data_corrupt with a reason for text that
/// is not one.
result<session_info> decode_session(std::string_view text);

std::string encode_message(const stored_message& m);
/// Returns false for truncated or unknown-version records.
bool decode_message(std::string_view bytes, stored_message& out);

/// Tool calls as JSON text ("" for none).
std::string tool_calls_to_json(const std::vector<tool_call>& calls);
/// Parses text produced by tool_calls_to_json ("" gives no calls).
bool tool_calls_from_json(std::string_view text, std::vector<tool_call>& out);

/// The text the full-text index holds for a message: content, tool name,
/// and each call's function name and arguments.
std::string indexed_text(const chat_message& m);

} // namespace mibyan
