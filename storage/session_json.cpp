#include "storage/session_json.hpp"

namespace mibyan {

json::value tokens_json(const token_usage& u) {
  json::value t;
  t["input"] = u.input_tokens;
  t["output"] = u.output_tokens;
  t["cache_read"] = u.cache_read_tokens;
  t["cache_write"] = u.cache_write_tokens;
  t["reasoning"] = u.reasoning_tokens;
  return t;
}

json::value session_json(const session_info& s) {
  json::value v;
  v["id"] = s.id;
  v["title"] = s.title;
  v["source"] = s.source;
  v["model"] = s.model;
  v["provider"] = s.provider;
  v["cwd"] = s.cwd;
  v["parent_session_id"] = s.parent_session_id;
  if (!s.metadata_json.empty())
    if (auto m = json::parse(s.metadata_json); m && m.v->is_object())
      v["metadata"] = *m.v;
  v["started_at_ms"] = s.started_at_ms;
  v["ended_at_ms"] = s.ended_at_ms;
  v["end_reason"] = s.end_reason;
  v["message_count"] = s.message_count;
  v["tool_call_count"] = s.tool_call_count;
  v["api_call_count"] = s.api_call_count;
  v["tokens"] = tokens_json(s.tokens);
  return v;
}

json::value message_json(const stored_message& m) {
  json::value v;
  v["id"] = static_cast<int64_t>(m.id);
  v["role"] = m.message.role;
  v["content"] = m.message.content;
  if (!m.message.tool_calls.empty()) {
    auto calls = json::parse(tool_calls_to_json(m.message.tool_calls));
    v["tool_calls"] = calls ? std::move(*calls.v) : json::value{};
  }
  if (!m.message.tool_call_id.empty())
    v["tool_call_id"] = m.message.tool_call_id;
  if (!m.message.tool_name.empty())
    v["tool_name"] = m.message.tool_name;
  if (!m.message.reasoning.empty())
    v["reasoning"] = m.message.reasoning;
  if (!m.message.finish_reason.empty())
    v["finish_reason"] = m.message.finish_reason;
  v["timestamp_ms"] = m.message.timestamp_ms;
  return v;
}

json::value search_results_json(const search_results& r) {
  json::value out;
  out["total"] = static_cast<int64_t>(r.total);
  json::value hits = json::value::make_array();
  for (auto& h : r.hits) {
    json::value v;
    v["message_id"] = static_cast<int64_t>(h.message_id);
    v["session_id"] = h.session_id;
    v["role"] = h.role;
    v["score"] = h.score;
    v["snippet"] = h.snippet;
    hits.push_back(std::move(v));
  }
  out["hits"] = std::move(hits);
  return out;
}

} // namespace mibyan
