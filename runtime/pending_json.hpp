// File: runtime/pending_json.hpp
//
// The JSON of pending approvals and questions (runtime/pending_approvals.hpp)
// as every front end shows them: GET /v1/approvals and /v1/clarifications,
// the chat stream's approval_required / clarify_required events
// (docs/serve.md, "Approvals and questions over HTTP") and the dashboard's
// live events. In the runtime layer so that the runtime's own event
// publishers can use it too. Pure functions.
#pragma once

#include "base/json.hpp"
#include "mibyan/pending.hpp"

namespace mibyan {

/// Approvals: {id, session_id, command, descriptions, choices,
/// created_at_ms, expires_at_ms[, guardian_verdict]}; clarify: {id,
/// session_id, question, choices, created_at_ms, expires_at_ms}.
json::value pending_json(const pending_request& r);

/// An event of the pending set:
/// {"type":"approval_required","approval":{...}} /
/// {"type":"clarify_required","clarification":{...}} when added,
/// {"type":"approval_resolved"|"clarify_resolved","id","session_id",
/// "outcome"} when ended.
json::value pending_event_json(const pending_event& e);

} // namespace mibyan
