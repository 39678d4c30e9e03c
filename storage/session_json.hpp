// File: storage/session_json.hpp
//
// The JSON shapes of stored sessions, shared by `mibyan sessions --json`
// and the HTTP API's /v1/sessions endpoints (docs/serve.md), so both show
// the same data.
//
// Thread safety: pure functions.
#pragma once

#include "base/json.hpp"
#include "storage/session_store.hpp"

namespace mibyan {

/// {"input","output","cache_read","cache_write","reasoning"}: a session's
/// token counts, as every session shape shows them.
json::value tokens_json(const token_usage& u);

/// {"id","title","source","model","provider","cwd","parent_session_id",
/// "started_at_ms","ended_at_ms","end_reason","message_count",
/// "tool_call_count","api_call_count","tokens":{...}}.
json::value session_json(const session_info& s);

/// {"id","role","content"} plus "tool_calls", "tool_call_id",
/// "tool_name", "reasoning", "finish_reason" when set, and "timestamp_ms".
json::value message_json(const stored_message& m);

/// {"total", "hits":[{"message_id","session_id","role","score",
/// "snippet"}]}.
json::value search_results_json(const search_results& r);

} // namespace mibyan
