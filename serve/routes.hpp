// File: serve/routes.hpp
//
// The Beast-free parts of `mibyan serve` (docs/serve.md): request-target
// parsing, ids, the /v1/sessions work against the session store, and the
// mapping of a turn outcome to what the client gets. Used by
// serve/connection.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "base/json.hpp"
#include "serve/openai_chat.hpp"
#include "runtime/runtime.hpp"

namespace mibyan {

class session_store;

namespace serve {

int64_t now_seconds();

/// "chatcmpl-<hex>", unique in the process.
std::string completion_id();

/// A session id from a client header: 1..128 of [A-Za-z0-9_.:-].
bool valid_session_id(const std::string& s);

/// Percent- and plus-decoding of a query component.
std::string url_decode(std::string_view s);

/// Splits a target into its path and decoded query parameters.
void split_target(std::string_view target, std::string& path,
                  std::map<std::string, std::string>& query);

/// Reads `limit` (1..1000) into `out` when present; false when malformed.
bool parse_limit(const std::map<std::string, std::string>& q, size_t& out);

/// An answer: status 200 with a JSON body, or an error status with a
/// message for the error shape and its code.
struct api_reply {
  int status = 200;
  std::string body;
  std::string code;
};

/// One /v1/sessions request.
struct sessions_call {
  /// "" lists; "search" searches; else the session id.
  std::string id;
  bool search = false;
  bool del = false;
  std::string q, role, only_session;
  size_t limit = 20;
};

/// Runs `call` against `store` (blocking: LMDB; a delete waits for fsync).
/// `busy(id)` says whether a turn of `id` runs (a delete is then refused);
/// `deleted(id)` runs after a successful delete.
api_reply run_sessions_call(session_store& store, const sessions_call& call,
                            const std::function<bool(const std::string&)>& busy,
                            const std::function<void(const std::string&)>&
                              deleted);

/// What a finished turn means for the client.
struct turn_summary {
  std::string answer;
  /// The message for an error reply ("" when ok).
  std::string message;
  bool ok = false;
  bool interrupted = false;
  /// The turn could not start (configuration, store).
  bool not_started = false;
  completion_usage usage;
  /// The "mibyan" extension object (session_id, api_calls, ...).
  json::value ext;
};

turn_summary summarize_turn(const turn_result& out,
                            const std::string& session_id);

} // namespace serve
} // namespace mibyan
