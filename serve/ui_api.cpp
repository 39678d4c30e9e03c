// The dashboard's JSON endpoints over the store and the configuration
// (serve/ui_api.hpp).
#include "serve/ui_api.hpp"

#include <algorithm>
#include <ctime>

#include "config/loader.hpp"
#include "config/mcp_config.hpp"
#include "storage/session_json.hpp"
#include "storage/session_store.hpp"

namespace mibyan::serve {

namespace {

constexpr const char* stateless_source = "api-stateless";
constexpr int64_t day_ms = 86'400'000;

api_reply fail(int status, std::string message, std::string code) {
  api_reply r;
  r.status = status;
  r.body = std::move(message);
  r.code = std::move(code);
  return r;
}

// Sessions of stateless API requests (and subagents of their roots, whose
// ids end in "@<pid>", a character client ids cannot contain): transient,
// never shown.
bool hidden(const session_info& s) {
  return s.source == stateless_source
         || s.parent_session_id.find('@') != std::string::npos;
}

json::value text_or_null(const std::string& s) {
  return s.empty() ? json::value{} : json::value{s};
}

std::string utc_day(int64_t ms) {
  std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
  return buf;
}

int64_t percentile(std::vector<int64_t>& xs, double p) {
  if (xs.empty())
    return 0;
  std::sort(xs.begin(), xs.end());
  auto i = static_cast<size_t>(p * static_cast<double>(xs.size() - 1) + 0.5);
  return xs[std::min(i, xs.size() - 1)];
}

json::value message_entry(const stored_message& sm) {
  const auto& m = sm.message;
  json::value v;
  v["id"] = static_cast<int64_t>(sm.id);
  v["role"] = m.role;
  v["content"] = m.content;
  v["reasoning"] = text_or_null(m.reasoning);
  auto calls = json::value::make_array();
  for (auto& c : m.tool_calls) {
    json::value call;
    call["id"] = c.id;
    call["name"] = c.name;
    call["arguments"] = c.arguments;
    calls.push_back(std::move(call));
  }
  v["tool_calls"] = std::move(calls);
  v["tool_call_id"] = text_or_null(m.tool_call_id);
  v["name"] = text_or_null(m.tool_name);
  v["finish_reason"] = text_or_null(m.finish_reason);
  v["ts_ms"] = m.timestamp_ms;
  return v;
}

} // namespace

std::string parse_count(const std::map<std::string, std::string>& q,
                        const std::string& name, int64_t min, int64_t max,
                        int64_t& out) {
  auto i = q.find(name);
  if (i == q.end())
    return {};
  const auto& t = i->second;
  auto bad = [&] {
    return name + " must be an integer from " + std::to_string(min) + " to "
           + std::to_string(max) + ", got '" + t.substr(0, 40) + "'";
  };
  if (t.empty() || t.size() > 12
      || t.find_first_not_of("0123456789") != std::string::npos)
    return bad();
  auto v = std::stoll(t);
  if (v < min || v > max)
    return bad();
  out = v;
  return {};
}

size_t utf16_offset(const std::string& text, size_t bytes) {
  size_t units = 0;
  for (size_t i = 0; i < bytes && i < text.size(); ++i) {
    auto b = static_cast<unsigned char>(text[i]);
    if ((b & 0xC0) != 0x80)
      units += b >= 0xF0 ? 2 : 1;
  }
  return units;
}

json::value ui_session_json(const session_info& s) {
  json::value v;
  v["id"] = s.id;
  v["source"] = s.source;
  v["model"] = s.model;
  v["provider"] = s.provider;
  v["title"] = s.title;
  v["parent_session_id"] = text_or_null(s.parent_session_id);
  v["started_at_ms"] = s.started_at_ms;
  v["ended_at_ms"] = s.ended_at_ms == 0 ? json::value{}
                                        : json::value{s.ended_at_ms};
  v["end_reason"] = text_or_null(s.end_reason);
  v["message_count"] = s.message_count;
  v["tool_call_count"] = s.tool_call_count;
  v["api_call_count"] = s.api_call_count;
  v["tokens"] = tokens_json(s.tokens);
  v["cost_usd"] = s.tokens.has_cost ? json::value{s.tokens.cost_usd}
                                    : json::value{};
  return v;
}

api_reply ui_list_sessions(session_store& store, const ui_list_call& call) {
  bool more = false;
  auto list = store.list_sessions_where(
    static_cast<size_t>(call.limit), static_cast<size_t>(call.offset),
    [&](const session_info& s) {
      if (hidden(s))
        return false;
      return call.source.empty() || s.source == call.source;
    },
    &more);
  if (!list)
    return fail(500, list.error, "store_error");
  auto data = json::value::make_array();
  for (auto& s : *list)
    data.push_back(ui_session_json(s));
  json::value v;
  v["data"] = std::move(data);
  v["next_offset"] = more ? json::value{static_cast<int64_t>(
                              call.offset + call.limit)}
                          : json::value{};
  api_reply r;
  r.body = v.dump();
  return r;
}

api_reply ui_search(session_store& store, const std::string& q,
                    int64_t limit) {
  search_request sr;
  sr.query = q;
  // Hits of stateless sessions are dropped below; ask for a few more.
  sr.limit = static_cast<size_t>(std::min<int64_t>(1000, limit * 2));
  auto found = store.search(sr);
  if (!found)
    return fail(400, found.error, "bad_search");
  auto data = json::value::make_array();
  std::map<std::string, bool> stateless;
  int64_t n = 0;
  for (auto& h : found->hits) {
    if (n == limit)
      break;
    auto known = stateless.find(h.session_id);
    if (known == stateless.end()) {
      auto s = store.get_session(h.session_id);
      known = stateless
                .emplace(h.session_id,
                         !s || hidden(*s))
                .first;
    }
    if (known->second)
      continue;
    json::value v;
    v["session_id"] = h.session_id;
    v["message_id"] = static_cast<int64_t>(h.message_id);
    v["role"] = h.role;
    v["text"] = h.text;
    auto spans = json::value::make_array();
    for (auto& [b, e] : h.highlights) {
      auto pair = json::value::make_array();
      pair.push_back(static_cast<int64_t>(utf16_offset(h.text, b)));
      pair.push_back(static_cast<int64_t>(utf16_offset(h.text, e)));
      spans.push_back(std::move(pair));
    }
    v["highlights"] = std::move(spans);
    data.push_back(std::move(v));
    ++n;
  }
  json::value out;
  out["data"] = std::move(data);
  api_reply r;
  r.body = out.dump();
  return r;
}

api_reply ui_transcript(session_store& store, const std::string& id) {
  auto info = store.get_session(id);
  if (!info || hidden(*info))
    return fail(404, "no session '" + id + "'", "session_not_found");
  auto msgs = store.load_messages(id);
  if (!msgs)
    return fail(500, msgs.error, "store_error");
  auto kids = store.list_children(id);
  if (!kids)
    return fail(500, kids.error, "store_error");
  auto v = ui_session_json(*info);
  auto list = json::value::make_array();
  for (auto& m : *msgs)
    list.push_back(message_entry(m));
  v["messages"] = std::move(list);
  // Subagents are children with source "delegate"; the other child of a
  // session ended by compression continues it.
  auto children = json::value::make_array();
  json::value next;
  for (auto& kid : *kids) {
    auto k = store.get_session(kid);
    if (!k)
      continue;
    if (k->source == "delegate")
      children.push_back(kid);
    else if (info->end_reason == "compression" && next.is_null())
      next = kid;
  }
  json::value previous;
  if (!info->parent_session_id.empty() && info->source != "delegate") {
    auto p = store.get_session(info->parent_session_id);
    if (p && p->end_reason == "compression")
      previous = info->parent_session_id;
  }
  v["children"] = std::move(children);
  json::value chain;
  chain["previous"] = std::move(previous);
  chain["next"] = std::move(next);
  v["chain"] = std::move(chain);
  api_reply r;
  r.body = v.dump();
  return r;
}

api_reply ui_export(session_store& store, const std::string& id,
                    int64_t cap) {
  auto info = store.get_session(id);
  if (!info || hidden(*info))
    return fail(404, "no session '" + id + "'", "session_not_found");
  auto msgs = store.load_messages(id);
  if (!msgs)
    return fail(500, msgs.error, "store_error");
  api_reply r;
  for (auto& m : *msgs) {
    auto line = message_entry(m);
    line["session_id"] = id;
    r.body += line.dump();
    r.body += '\n';
    if (static_cast<int64_t>(r.body.size()) > cap)
      return fail(413,
                  "the export of session '" + id
                    + "' is larger than server.max_export_bytes ("
                    + std::to_string(cap) + " bytes)",
                  "export_too_large");
  }
  return r;
}

api_reply ui_usage(session_store& store, int64_t days, int64_t now_ms) {
  struct bucket {
    int64_t turns = 0, input = 0, output = 0;
    double cost = 0;
    bool has_cost = false;
    std::vector<int64_t> latencies;
  };
  std::map<std::pair<std::string, std::string>, bucket> by_day;
  std::map<std::string, bucket> by_model;
  int64_t since = now_ms - days * day_ms;
  // One read of the sessions in range (newest first, older ones are not
  // touched), then each session's messages for its turns.
  auto list = store.list_sessions_since(since, size_t{10'000'000});
  if (!list)
    return fail(500, list.error, "store_error");
  for (auto& s : *list) {
    if (hidden(s))
      continue;
    std::vector<stored_message> none;
    auto msgs = s.message_count > 0
                  ? store.load_messages(s.id)
                  : store_result<std::vector<stored_message>>{none};
    if (!msgs)
      continue; // deleted meanwhile
    auto model = s.model.empty() ? std::string{"unknown"} : s.model;
    auto& d = by_day[{utc_day(s.started_at_ms), model}];
    auto& m = by_model[model];
    // Turns: each user message up to the last message before the next.
    int64_t turn_start = -1, turn_last = -1;
    auto close_turn = [&] {
      if (turn_start < 0)
        return;
      ++d.turns;
      ++m.turns;
      if (turn_last >= turn_start && turn_start > 0)
        d.latencies.push_back(turn_last - turn_start);
    };
    for (auto& sm : *msgs) {
      if (sm.message.role == "user") {
        close_turn();
        turn_start = sm.message.timestamp_ms;
        turn_last = -1;
      } else if (turn_start >= 0) {
        turn_last = sm.message.timestamp_ms;
      }
    }
    close_turn();
    for (auto* b : {&d, &m}) {
      b->input += s.tokens.input_tokens + s.tokens.cache_read_tokens
                  + s.tokens.cache_write_tokens;
      b->output += s.tokens.output_tokens;
      if (s.tokens.has_cost) {
        b->cost += s.tokens.cost_usd;
        b->has_cost = true;
      }
    }
  }
  auto cost = [](const bucket& b) {
    return b.has_cost ? json::value{b.cost} : json::value{};
  };
  auto days_out = json::value::make_array();
  for (auto& [k, b] : by_day) {
    json::value v;
    v["day"] = k.first;
    v["model"] = k.second;
    v["turns"] = b.turns;
    v["input_tokens"] = b.input;
    v["output_tokens"] = b.output;
    v["cost_usd"] = cost(b);
    auto lat = b.latencies;
    v["latency_ms_p50"] = lat.empty() ? json::value{}
                                      : json::value{percentile(lat, 0.5)};
    v["latency_ms_p95"] = lat.empty() ? json::value{}
                                      : json::value{percentile(lat, 0.95)};
    days_out.push_back(std::move(v));
  }
  auto models_out = json::value::make_array();
  for (auto& [k, b] : by_model) {
    json::value v;
    v["model"] = k;
    v["turns"] = b.turns;
    v["input_tokens"] = b.input;
    v["output_tokens"] = b.output;
    v["cost_usd"] = cost(b);
    models_out.push_back(std::move(v));
  }
  json::value out;
  out["days"] = days;
  out["by_day"] = std::move(days_out);
  out["by_model"] = std::move(models_out);
  api_reply r;
  r.body = out.dump();
  return r;
}

api_reply ui_config(const options& effective) {
  json::value cfg = json::value::make_object();
  // The shown values are JSON-compatible (numbers, booleans, quoted
  // strings, flow lists) except for unusual characters: those stay text.
  for (auto& o : shown_options(effective)) {
    auto parsed = json::parse(o.value);
    cfg[o.section][o.key] = parsed ? *parsed.v : json::value{o.value};
  }
  auto allow = json::value::make_array();
  for (auto& a : effective.command_allowlist)
    allow.push_back(a);
  cfg["command_allowlist"] = std::move(allow);
  cfg["mcp_servers"] = render_mcp_servers(effective.mcp_servers);
  json::value env = json::value::make_object();
  for (auto& [k, v] : effective.env_file)
    env[k] = "**** (" + std::to_string(v.size()) + " chars)";
  json::value out;
  out["home"] = effective.home;
  out["config_file"] = text_or_null(effective.config_path);
  out["config"] = std::move(cfg);
  out["env"] = std::move(env);
  // What `mibyan config check` says about the files as they are now.
  auto checks = json::value::make_array();
  auto loaded = load_options(effective.home);
  json::value c;
  if (loaded.ok()) {
    c["level"] = "ok";
    c["key"] = "";
    c["message"] = "config OK: "
                   + (loaded->config_path.empty()
                        ? "no config file, using defaults"
                        : loaded->config_path);
  } else {
    c["level"] = "error";
    c["key"] = "";
    c["message"] = loaded.error;
  }
  checks.push_back(std::move(c));
  out["check"] = std::move(checks);
  api_reply r;
  r.body = out.dump();
  return r;
}

} // namespace mibyan::serve
