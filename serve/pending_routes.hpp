// File: serve/pending_routes.hpp
//
// The Beast-free parts of the pending-request endpoints of `mibyan serve`
// (docs/serve.md, "Approvals and questions over HTTP"): GET /v1/approvals,
// POST /v1/approvals/{id}, GET /v1/clarifications, POST
// /v1/clarifications/{id} (the JSON of a request is runtime/pending_json.hpp).
// Never blocks: the registry only takes a mutex (an answer wakes the
// waiting tool call, which does the rest on its own thread).
#pragma once

#include <map>
#include <string>

#include "mibyan/pending.hpp"
#include "runtime/pending_json.hpp"
#include "serve/routes.hpp"

namespace mibyan {

class runtime;

namespace serve {

/// GET /v1/approvals or /v1/clarifications: {"object":"list","enabled",
/// "data":[...]}, oldest first; `session` ("" = all) filters.
api_reply list_pending(runtime& rt, pending_kind kind, bool enabled,
                       const std::string& session);

/// POST /v1/approvals/{id} ({"choice":"once|session|always|deny"}) or
/// /v1/clarifications/{id} ({"answer":"..."}). 200 {id, choice|answer};
/// 400 a malformed id or body, or a choice not offered; 404 an unknown
/// id; 409 a request that ended or was answered already.
api_reply answer_pending(runtime& rt, pending_kind kind,
                         const std::string& id, const std::string& body);

} // namespace serve
} // namespace mibyan
