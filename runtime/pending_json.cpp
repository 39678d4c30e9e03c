#include "runtime/pending_json.hpp"

namespace mibyan {

namespace {

json::value string_array(const std::vector<std::string>& v) {
  json::value a = json::value::make_array();
  for (auto& s : v)
    a.push_back(s);
  return a;
}

} // namespace

json::value pending_json(const pending_request& r) {
  json::value v;
  v["id"] = r.id;
  v["session_id"] = r.session_id;
  if (r.kind == pending_kind::approval) {
    v["command"] = r.command;
    v["descriptions"] = string_array(r.descriptions);
    if (!r.guardian_verdict.empty())
      v["guardian_verdict"] = r.guardian_verdict;
  } else {
    v["question"] = r.question;
  }
  v["choices"] = string_array(r.choices);
  v["created_at_ms"] = r.created_at_ms;
  v["expires_at_ms"] = r.expires_at_ms;
  return v;
}

json::value pending_event_json(const pending_event& e) {
  bool approval = e.request.kind == pending_kind::approval;
  json::value v;
  if (e.what == pending_event::type::added) {
    v["type"] = approval ? "approval_required" : "clarify_required";
    v[approval ? "approval" : "clarification"] = pending_json(e.request);
  } else {
    v["type"] = approval ? "approval_resolved" : "clarify_resolved";
    v["id"] = e.request.id;
    v["session_id"] = e.request.session_id;
    v["outcome"] = e.outcome;
  }
  return v;
}

} // namespace mibyan
