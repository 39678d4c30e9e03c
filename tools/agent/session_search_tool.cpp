// The session_search tool (docs/tools.md, "session_search"): full-text
// search over past sessions through session_store::search, plus scrolling,
// reading and browsing them. No model calls. The current session (and its
// compression chain) is left out of discover results unless
// include_current is true.
#include <algorithm>
#include <ctime>
#include <map>
#include <set>

#include "base/utc_time.hpp"
#include "storage/session_store.hpp"
#include "tools/agent/agent_tool_state.hpp"
#include "tools/agent/agent_tools.hpp"

namespace mibyan {

namespace {

constexpr size_t shown_chars = 600;
constexpr size_t context_messages = 5;
constexpr size_t bookend = 3;
constexpr size_t candidate_hits = 200;

std::string clip(const std::string& s) {
  if (s.size() <= shown_chars)
    return s;
  size_t cut = shown_chars;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80)
    --cut;
  return s.substr(0, cut) + " …[" + std::to_string(s.size() - cut)
         + " more chars]";
}

json::value message_json(const stored_message& m, bool anchor = false) {
  json::value v;
  v["id"] = static_cast<int64_t>(m.id);
  v["role"] = m.message.role;
  std::string text = m.message.content;
  if (text.empty() && !m.message.tool_calls.empty()) {
    text = "[tool calls:";
    for (auto& c : m.message.tool_calls)
      text += " " + c.name;
    text += "]";
  }
  v["content"] = clip(text);
  if (!m.message.tool_name.empty())
    v["tool_name"] = m.message.tool_name;
  if (anchor)
    v["anchor"] = true;
  return v;
}

bool conversational(const stored_message& m) {
  return m.message.role == "user" || m.message.role == "assistant";
}

// The first session of `id`'s compression chain.
std::string lineage_root(const session_store& store, std::string id) {
  for (int guard = 0; guard < 64; ++guard) {
    auto s = store.get_session(id);
    if (!s || s->parent_session_id.empty())
      return id;
    auto parent = store.get_session(s->parent_session_id);
    if (!parent || parent->end_reason != "compression")
      return id;
    id = parent->id;
  }
  return id;
}

std::vector<std::string> split_roles(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : text + ",") {
    if (c == ',' || c == ' ') {
      if (!cur.empty())
        out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  return out;
}

json::value failure(std::string msg) {
  json::value r = error_result(std::move(msg));
  r["success"] = false;
  return r;
}

json::value discover(const session_store& store, const json::value& args,
                     const std::string& current) {
  auto limit = static_cast<size_t>(
    std::clamp<int64_t>(args.get_int("limit", 3), 1, 10));
  search_request req;
  req.query = args.get_string("query");
  req.roles = split_roles(args.get_string("role_filter", "user,assistant"));
  req.limit = candidate_hits;
  auto found = store.search(req);
  if (!found)
    return failure("search failed: " + found.error);
  bool include_current = args.get_bool("include_current", false);
  std::string current_root = current.empty() ? std::string{}
                                             : lineage_root(store, current);
  // Best hit per lineage, in rank order.
  std::vector<const search_hit*> picked;
  std::set<std::string> roots;
  for (auto& h : found->hits) {
    auto root = lineage_root(store, h.session_id);
    if (!include_current && !current.empty()
        && (h.session_id == current || root == current_root))
      continue;
    if (!roots.insert(root).second)
      continue;
    picked.push_back(&h);
  }
  auto sort = args.get_string("sort");
  std::map<std::string, session_info> infos;
  for (auto h : picked)
    if (auto s = store.get_session(h->session_id))
      infos[h->session_id] = *s;
  if (sort == "newest" || sort == "oldest")
    std::stable_sort(picked.begin(), picked.end(),
                     [&](const search_hit* a, const search_hit* b) {
                       auto ta = infos[a->session_id].started_at_ms;
                       auto tb = infos[b->session_id].started_at_ms;
                       return sort == "newest" ? ta > tb : ta < tb;
                     });
  if (picked.size() > limit)
    picked.resize(limit);
  json::value results = json::value::make_array();
  for (auto h : picked) {
    auto& info = infos[h->session_id];
    auto msgs = store.load_messages(h->session_id);
    if (!msgs)
      continue;
    auto& all = *msgs;
    size_t at = 0;
    while (at < all.size() && all[at].id != h->message_id)
      ++at;
    json::value r;
    r["session_id"] = h->session_id;
    r["title"] = info.title;
    r["when"] = iso_utc_from_ms(info.started_at_ms);
    r["source"] = info.source;
    r["snippet"] = h->snippet;
    std::vector<const stored_message*> talk;
    for (auto& m : all)
      if (conversational(m))
        talk.push_back(&m);
    json::value start = json::value::make_array();
    json::value end = json::value::make_array();
    for (size_t i = 0; i < talk.size() && i < bookend; ++i)
      start.push_back(message_json(*talk[i]));
    for (size_t i = talk.size() > bookend ? talk.size() - bookend : 0;
         i < talk.size(); ++i)
      end.push_back(message_json(*talk[i]));
    size_t lo = at > context_messages ? at - context_messages : 0;
    size_t hi = std::min(all.size(), at + context_messages + 1);
    json::value window = json::value::make_array();
    for (size_t i = lo; i < hi; ++i)
      window.push_back(message_json(all[i], i == at));
    r["bookend_start"] = std::move(start);
    r["messages"] = std::move(window);
    r["bookend_end"] = std::move(end);
    r["match_message_id"] = static_cast<int64_t>(h->message_id);
    r["messages_before"] = static_cast<int64_t>(lo);
    r["messages_after"] = static_cast<int64_t>(all.size() - hi);
    results.push_back(std::move(r));
  }
  json::value out;
  out["success"] = true;
  out["mode"] = "discover";
  out["count"] = static_cast<int64_t>(results.size());
  if (results.size() == 0)
    out["message"] = "No matching sessions found.";
  out["results"] = std::move(results);
  return out;
}

json::value scroll_or_read(const session_store& store, const json::value& args) {
  auto sid = args.get_string("session_id");
  auto info = store.get_session(sid);
  if (!info)
    return failure("Unknown session: " + sid);
  auto msgs = store.load_messages(sid);
  if (!msgs)
    return failure("cannot load session " + sid + ": " + msgs.error);
  auto& all = *msgs;
  json::value out;
  out["success"] = true;
  out["session_id"] = sid;
  out["title"] = info->title;
  out["when"] = iso_utc_from_ms(info->started_at_ms);
  out["total_messages"] = static_cast<int64_t>(all.size());
  json::value list = json::value::make_array();
  if (auto around = args.find("around_message_id"); around && !around->is_null()) {
    if (!around->is_int() || around->as_int() < 0)
      return failure("around_message_id must be a message id (an integer)");
    auto want = static_cast<uint64_t>(around->as_int());
    auto window = static_cast<size_t>(
      std::clamp<int64_t>(args.get_int("window", 5), 1, 20));
    size_t at = 0;
    while (at < all.size() && all[at].id != want)
      ++at;
    if (at == all.size())
      return failure("message " + std::to_string(want)
                     + " is not in session " + sid);
    size_t lo = at > window ? at - window : 0;
    size_t hi = std::min(all.size(), at + window + 1);
    for (size_t i = lo; i < hi; ++i)
      list.push_back(message_json(all[i], i == at));
    out["mode"] = "scroll";
    out["messages_before"] = static_cast<int64_t>(lo);
    out["messages_after"] = static_cast<int64_t>(all.size() - hi);
  } else {
    out["mode"] = "read";
    if (all.size() > 30) {
      for (size_t i = 0; i < 20; ++i)
        list.push_back(message_json(all[i]));
      out["omitted"] = static_cast<int64_t>(all.size() - 30);
      for (size_t i = all.size() - 10; i < all.size(); ++i)
        list.push_back(message_json(all[i]));
    } else {
      for (auto& m : all)
        list.push_back(message_json(m));
    }
  }
  out["messages"] = std::move(list);
  return out;
}

json::value browse(const session_store& store, const json::value& args,
                   const std::string& current) {
  auto limit = static_cast<size_t>(
    std::clamp<int64_t>(args.get_int("limit", 10), 1, 50));
  auto list = store.list_sessions(limit + 1, 0);
  if (!list)
    return failure("cannot list sessions: " + list.error);
  json::value results = json::value::make_array();
  for (auto& s : *list) {
    if (s.id == current && !args.get_bool("include_current", false))
      continue;
    if (results.size() >= limit)
      break;
    json::value r;
    r["session_id"] = s.id;
    r["title"] = s.title;
    r["when"] = iso_utc_from_ms(s.started_at_ms);
    r["source"] = s.source;
    r["message_count"] = s.message_count;
    results.push_back(std::move(r));
  }
  json::value out;
  out["success"] = true;
  out["mode"] = "browse";
  out["count"] = static_cast<int64_t>(results.size());
  out["results"] = std::move(results);
  return out;
}

class session_search_tool final : public tool {
public:
  const char* name() const override { return "session_search"; }
  const char* toolset() const override { return "session_search"; }

  std::string description() const override {
    return "Search your past sessions (full text, no model calls). With "
           "query: the best-matching sessions, each with its opening and "
           "closing messages and the messages around the match (discover). "
           "Query words are ANDed; use \"quoted phrases\" for exact text. "
           "With session_id and around_message_id: the messages around one "
           "message (scroll). With session_id alone: the whole session "
           "(read). With nothing: the most recent sessions (browse). The "
           "current session is excluded unless include_current is true.";
  }

  json::value schema() const override {
    json::value sort = schema_property(
      "string", "Order of discover results: rank (default), newest, oldest.");
    sort["enum"] = json::array{"rank", "newest", "oldest"};
    json::value props;
    props["query"] = schema_property("string", "Words or \"phrases\" to find.");
    props["limit"] = schema_property("integer",
                                     "Sessions returned (default 3, max 10).");
    props["sort"] = std::move(sort);
    props["role_filter"] = schema_property(
      "string", "Comma-separated roles searched (default user,assistant).");
    props["session_id"] = schema_property("string",
                                          "A session to scroll or read.");
    props["around_message_id"] = schema_property(
      "integer", "Scroll: the message to centre on.");
    props["window"] = schema_property(
      "integer", "Scroll: messages on each side (default 5, 1..20).");
    props["include_current"] = schema_property(
      "boolean", "Also search the current session (default false).");
    json::value s;
    s["type"] = "object";
    s["properties"] = std::move(props);
    return s;
  }

  bool parallel_safe() const override { return true; }

  json::value run(const json::value& args,
                  const tool_context& ctx) const override {
    if (ctx.agent == nullptr || !ctx.agent->store)
      return failure("session_search is unavailable: the session store is "
                     "not open in this context.");
    auto& store = *ctx.agent->store;
    if (!args.get_string("query").empty())
      return discover(store, args, ctx.session_id);
    if (!args.get_string("session_id").empty())
      return scroll_or_read(store, args);
    return browse(store, args, ctx.session_id);
  }
};

} // namespace

std::unique_ptr<tool> make_session_search_tool() {
  return std::make_unique<session_search_tool>();
}

} // namespace mibyan
