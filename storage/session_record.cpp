#include "storage/session_record.hpp"

#include "base/json.hpp"
#include "storage/byte_codec.hpp"

namespace mibyan {

namespace {

constexpr char message_format_v1 = 1;

} // namespace

std::string encode_session(const session_info& s) {
  auto o = json::value::make_object();
  o.set("id", s.id);
  o.set("source", s.source);
  o.set("model", s.model);
  o.set("provider", s.provider);
  o.set("cwd", s.cwd);
  o.set("title", s.title);
  o.set("parent_session_id", s.parent_session_id);
  if (!s.metadata_json.empty())
    if (auto m = json::parse(s.metadata_json); m && m.v->is_object())
      o.set("metadata", *m.v);
  o.set("started_at", s.started_at_ms);
  o.set("ended_at", s.ended_at_ms);
  o.set("end_reason", s.end_reason);
  o.set("message_count", s.message_count);
  o.set("tool_call_count", s.tool_call_count);
  o.set("api_call_count", s.api_call_count);
  o.set("input_tokens", s.tokens.input_tokens);
  o.set("output_tokens", s.tokens.output_tokens);
  o.set("cache_read_tokens", s.tokens.cache_read_tokens);
  o.set("cache_write_tokens", s.tokens.cache_write_tokens);
  o.set("reasoning_tokens", s.tokens.reasoning_tokens);
  // Absent (not 0) when no call reported a cost; records written before
  // the field existed read as unknown.
  if (s.tokens.has_cost)
    o.set("cost_usd", s.tokens.cost_usd);
  return o.dump();
}

result<session_info> decode_session(std::string_view text) {
  auto parsed = json::parse(text);
  if (!parsed)
    return status::failure(status_code::data_corrupt,
                           "session record is not JSON: " + parsed.error);
  const auto& o = *parsed.v;
  if (!o.is_object() || o.get_string("id").empty())
    return status::failure(status_code::data_corrupt,
                           "session record has no id");
  session_info s;
  s.id = o.get_string("id");
  s.source = o.get_string("source");
  s.model = o.get_string("model");
  s.provider = o.get_string("provider");
  s.cwd = o.get_string("cwd");
  s.title = o.get_string("title");
  s.parent_session_id = o.get_string("parent_session_id");
  if (auto m = o.find("metadata"); m && m->is_object())
    s.metadata_json = m->dump();
  s.started_at_ms = o.get_int("started_at", 0);
  s.ended_at_ms = o.get_int("ended_at", 0);
  s.end_reason = o.get_string("end_reason");
  s.message_count = o.get_int("message_count", 0);
  s.tool_call_count = o.get_int("tool_call_count", 0);
  s.api_call_count = o.get_int("api_call_count", 0);
  s.tokens.input_tokens = o.get_int("input_tokens", 0);
  s.tokens.output_tokens = o.get_int("output_tokens", 0);
  s.tokens.cache_read_tokens = o.get_int("cache_read_tokens", 0);
  s.tokens.cache_write_tokens = o.get_int("cache_write_tokens", 0);
  s.tokens.reasoning_tokens = o.get_int("reasoning_tokens", 0);
  if (auto c = o.find("cost_usd"); c && c->is_number()) {
    s.tokens.cost_usd = c->as_double();
    s.tokens.has_cost = true;
  }
  return s;
}

std::string tool_calls_to_json(const std::vector<tool_call>& calls) {
  if (calls.empty())
    return {};
  auto arr = json::value::make_array();
  for (auto& c : calls) {
    auto fn = json::value::make_object();
    fn.set("name", c.name);
    fn.set("arguments", c.arguments);
    auto o = json::value::make_object();
    o.set("id", c.id);
    o.set("type", "function");
    o.set("function", std::move(fn));
    arr.push_back(std::move(o));
  }
  return arr.dump();
}

bool tool_calls_from_json(std::string_view text, std::vector<tool_call>& out) {
  out.clear();
  if (text.empty())
    return true;
  auto parsed = json::parse(text);
  if (!parsed || !parsed.v->is_array())
    return false;
  for (auto& item : parsed.v->as_array()) {
    tool_call c;
    c.id = item.get_string("id");
    if (auto fn = item.find("function"); fn != nullptr) {
      c.name = fn->get_string("name");
      c.arguments = fn->get_string("arguments");
    }
    out.push_back(std::move(c));
  }
  return true;
}

std::string encode_message(const stored_message& m) {
  std::string out;
  const auto& c = m.message;
  out.reserve(64 + m.session_id.size() + c.content.size()
              + c.reasoning.size());
  out.push_back(message_format_v1);
  codec::put_varint(out, m.id);
  codec::put_bytes(out, m.session_id);
  codec::put_bytes(out, m.key);
  codec::put_bytes(out, c.role);
  codec::put_bytes(out, c.content);
  codec::put_bytes(out, tool_calls_to_json(c.tool_calls));
  codec::put_bytes(out, c.tool_call_id);
  codec::put_bytes(out, c.tool_name);
  codec::put_bytes(out, c.reasoning);
  codec::put_bytes(out, c.finish_reason);
  codec::put_svarint(out, c.timestamp_ms);
  return out;
}

bool decode_message(std::string_view in, stored_message& m) {
  if (!codec::get_format(in, message_format_v1))
    return false;
  auto& c = m.message;
  std::string_view calls;
  bool ok = codec::get_varint(in, m.id)
            && codec::get_string(in, m.session_id)
            && codec::get_string(in, m.key) && codec::get_string(in, c.role)
            && codec::get_string(in, c.content)
            && codec::get_bytes(in, calls)
            && codec::get_string(in, c.tool_call_id)
            && codec::get_string(in, c.tool_name)
            && codec::get_string(in, c.reasoning)
            && codec::get_string(in, c.finish_reason)
            && codec::get_svarint(in, c.timestamp_ms);
  return ok && tool_calls_from_json(calls, c.tool_calls);
}

std::string indexed_text(const chat_message& m) {
  std::string text = m.content;
  if (!m.tool_name.empty()) {
    text += ' ';
    text += m.tool_name;
  }
  for (auto& c : m.tool_calls) {
    text += ' ';
    text += c.name;
    text += ' ';
    text += c.arguments;
  }
  return text;
}

} // namespace mibyan
