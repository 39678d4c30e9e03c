// File: serve/ui_api.hpp
//
// The dashboard's JSON endpoints over the session store and the
// configuration (docs/serve.md "Dashboard"), Beast-free: each takes its
// parsed parameters and returns a serve::api_reply (status, body or error
// message, code). Every function blocks on LMDB or files: call them on the
// server's store pool, never on an I/O thread.
//
// Text from the store (content, reasoning, arguments, results, titles) goes
// into JSON strings byte for byte; nothing is rendered as HTML here.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "serve/routes.hpp"
#include "storage/session_record.hpp"

namespace mibyan {

struct options;

namespace serve {

/// Reads integer parameter `name` into `out` when present: decimal digits
/// only, within [min, max]. Returns "" or the message of a 400.
std::string parse_count(const std::map<std::string, std::string>& q,
                        const std::string& name, int64_t min, int64_t max,
                        int64_t& out);

/// Byte offset `bytes` in UTF-8 `text` as UTF-16 code units.
size_t utf16_offset(const std::string& text, size_t bytes);

struct ui_list_call {
  int64_t limit = 50;
  int64_t offset = 0;
  /// Only sessions of this source ("" = all but api-stateless).
  std::string source;
};

/// GET /ui/api/sessions: {"data":[...],"next_offset":n|null}, newest
/// first, never a stateless API session.
api_reply ui_list_sessions(session_store& store, const ui_list_call& call);

/// GET /ui/api/search: {"data":[{session_id,message_id,role,text,
/// highlights:[[start,end]...]}]} with UTF-16 offsets into text.
api_reply ui_search(session_store& store, const std::string& q,
                    int64_t limit);

/// GET /ui/api/sessions/{id}: the session, its messages, its subagent
/// children and its compression chain. 404 for an unknown id.
api_reply ui_transcript(session_store& store, const std::string& id);

/// GET /ui/api/sessions/{id}/export: one message JSON per line; 413 when
/// the export would exceed `cap` bytes. The body is NDJSON on success.
api_reply ui_export(session_store& store, const std::string& id,
                    int64_t cap);

/// GET /ui/api/usage?days=N: tokens, cost, turns and turn latency by day
/// (UTC) and model, and by model, over the sessions started in the last
/// `days` days before `now_ms`. A turn runs from a user message to the
/// last message before the next user message; its latency is the
/// difference of their timestamps.
api_reply ui_usage(session_store& store, int64_t days, int64_t now_ms);

/// GET /ui/api/config: {"config":{...},"check":[{level,key,message}]}:
/// `effective` masked as `mibyan config show` masks it; `check` from
/// loading the configuration of `effective.home` again (what `mibyan
/// config check` reports now).
api_reply ui_config(const options& effective);

/// The fields of a session row as the dashboard lists them.
json::value ui_session_json(const session_info& s);

} // namespace serve
} // namespace mibyan
