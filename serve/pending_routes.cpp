#include "serve/pending_routes.hpp"

#include "runtime/pending_approvals.hpp"
#include "runtime/runtime.hpp"

namespace mibyan::serve {

namespace {

// The longest clarify answer taken (bytes).
constexpr size_t max_answer_bytes = 64 * 1024;

const char* noun(pending_kind kind) {
  return kind == pending_kind::approval ? "approval" : "clarification";
}

} // namespace

api_reply list_pending(runtime& rt, pending_kind kind, bool enabled,
                       const std::string& session) {
  json::value data = json::value::make_array();
  for (auto& r : rt.pending_requests(kind))
    if (session.empty() || r.session_id == session)
      data.push_back(pending_json(r));
  json::value v;
  v["object"] = "list";
  v["enabled"] = enabled;
  v["data"] = std::move(data);
  return {200, v.dump(), ""};
}

api_reply answer_pending(runtime& rt, pending_kind kind,
                         const std::string& id, const std::string& body) {
  const std::string what = noun(kind);
  if (!pending_approvals::well_formed(id, kind))
    return {400,
            "malformed " + what + " id: expected '"
              + (kind == pending_kind::approval ? "apr_" : "clr_")
              + "' and 32 lowercase hex digits",
            "invalid_id"};
  auto parsed = json::parse(body);
  if (!parsed || !parsed.v->is_object())
    return {400, "the body must be a JSON object", "invalid_request"};
  const auto& obj = *parsed.v;
  json::value out;
  out["id"] = id;
  pending_answer a;
  if (kind == pending_kind::approval) {
    auto c = obj.find("choice");
    approval_choice choice;
    if (c == nullptr || !c->is_string()
        || !parse_approval_choice(c->as_string(), &choice))
      return {400,
              "'choice' must be one of \"once\", \"session\", \"always\", "
              "\"deny\"",
              "invalid_choice"};
    a = rt.answer_approval(id, choice);
    out["choice"] = c->as_string();
  } else {
    auto t = obj.find("answer");
    if (t == nullptr || !t->is_string()
        || t->as_string().find_first_not_of(" \t\r\n") == std::string::npos)
      return {400, "'answer' must be a non-empty string", "invalid_answer"};
    if (t->as_string().size() > max_answer_bytes)
      return {400,
              "'answer' is longer than " + std::to_string(max_answer_bytes)
                + " bytes",
              "invalid_answer"};
    a = rt.answer_clarification(id, t->as_string());
    out["answer"] = t->as_string();
  }
  switch (a) {
  case pending_answer::ok:
    return {200, out.dump(), ""};
  case pending_answer::unknown:
    return {404, "no pending " + what + " '" + id + "'", what + "_not_found"};
  case pending_answer::ended:
    return {409,
            "the " + what + " '" + id
              + "' has ended (answered, timed out or cancelled)",
            what + "_ended"};
  case pending_answer::already_answered:
    return {409, "the " + what + " '" + id + "' was answered already",
            "already_answered"};
  case pending_answer::not_offered:
    break;
  }
  return {400,
          "that choice is not offered for '" + id
            + "' (see its 'choices'; after a reviewer's DENY only once or "
              "deny)",
          "choice_not_offered"};
}

} // namespace mibyan::serve
