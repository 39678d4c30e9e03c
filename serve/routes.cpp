#include "serve/routes.hpp"

#include "agent/turn_result.hpp"

#include <atomic>
#include <cctype>
#include <cstdio>
#include <ctime>
#include <random>

#include "storage/session_json.hpp"
#include "storage/session_store.hpp"

namespace mibyan::serve {

int64_t now_seconds() {
  return static_cast<int64_t>(std::time(nullptr));
}

std::string completion_id() {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = std::random_device{}();
  char buf[48];
  std::snprintf(buf, sizeof buf, "chatcmpl-%012llx%06llx",
                static_cast<unsigned long long>(salt & 0xffffffffffffull),
                static_cast<unsigned long long>(++counter & 0xffffffull));
  return buf;
}

// A session id from a client header: 1..128 of [A-Za-z0-9_.:-].
bool valid_session_id(const std::string& s) {
  if (s.empty() || s.size() > 128)
    return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'
          || c == ':' || c == '-'))
      return false;
  return true;
}

std::string url_decode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size()
               && std::isxdigit(static_cast<unsigned char>(s[i + 1]))
               && std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(std::stoi(std::string{s.substr(i + 1, 2)},
                                         nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// Splits a target into its path and decoded query parameters.
void split_target(std::string_view target, std::string& path,
                  std::map<std::string, std::string>& query) {
  auto q = target.find('?');
  path = std::string{target.substr(0, q)};
  if (q == std::string_view::npos)
    return;
  auto rest = target.substr(q + 1);
  while (!rest.empty()) {
    auto amp = rest.find('&');
    auto item = rest.substr(0, amp);
    auto eq = item.find('=');
    if (eq == std::string_view::npos)
      query[url_decode(item)] = "";
    else
      query[url_decode(item.substr(0, eq))] = url_decode(item.substr(eq + 1));
    if (amp == std::string_view::npos)
      break;
    rest = rest.substr(amp + 1);
  }
}

bool parse_limit(const std::map<std::string, std::string>& q, size_t& out) {
  auto i = q.find("limit");
  if (i == q.end())
    return true;
  char* end = nullptr;
  auto n = std::strtoul(i->second.c_str(), &end, 10);
  if (i->second.empty() || *end != '\0' || n == 0 || n > 1000)
    return false;
  out = n;
  return true;
}

api_reply run_sessions_call(session_store& store, const sessions_call& call,
                            const std::function<bool(const std::string&)>& busy,
                            const std::function<void(const std::string&)>&
                              deleted) {
  const auto& id = call.id;
    api_reply r;
    if (call.search) {
      search_request sr;
      sr.query = call.q;
      sr.limit = call.limit;
      sr.session_id = call.only_session;
      if (!call.role.empty())
        sr.roles.push_back(call.role);
      auto found = store.search(sr);
      if (found)
        r.body = search_results_json(*found).dump();
      else
        r = {400, found.error, "bad_search"};
    } else if (id.empty()) {
      auto list = store.list_sessions(call.limit, 0);
      if (list) {
        json::value out = json::value::make_array();
        for (auto& s : *list)
          out.push_back(session_json(s));
        json::value v;
        v["object"] = "list";
        v["data"] = std::move(out);
        r.body = v.dump();
      } else {
        r = {500, list.error, "store_error"};
      }
    } else if (!store.get_session(id)) {
      r = {404, "no session '" + id + "'", "session_not_found"};
    } else if (call.del) {
      if (busy(id)) {
        r = {409, "session '" + id + "' has a turn running; retry later",
             "session_busy"};
      } else if (auto st = store.delete_session(id); !st) {
        r = {500, st.error, "store_error"};
      } else {
        deleted(id);
        json::value v;
        v["id"] = id;
        v["object"] = "session.deleted";
        v["deleted"] = true;
        r.body = v.dump();
      }
    } else {
      auto info = store.get_session(id);
      auto msgs = store.load_messages(id);
      if (info && msgs) {
        auto out = session_json(*info);
        json::value list = json::value::make_array();
        for (auto& m : *msgs)
          list.push_back(message_json(m));
        out["messages"] = std::move(list);
        r.body = out.dump();
      } else {
        r = {500, info ? msgs.error : info.error, "store_error"};
      }
    }
  return r;
}

turn_summary summarize_turn(const turn_result& out,
                            const std::string& session_id) {
  turn_summary s;
  bool failed = false, has_answer = false;
  std::string err;
  if (!out.started) {
    failed = true;
    s.not_started = true;
    err = out.error;
  } else {
    if (out.final_response) {
      s.answer = *out.final_response;
      has_answer = true;
    }
    failed = out.failed;
    s.interrupted = out.interrupted;
    err = out.error;
    auto& u = out.usage;
    s.usage.prompt_tokens = u.input_tokens + u.cache_read_tokens
                            + u.cache_write_tokens;
    s.usage.completion_tokens = u.output_tokens;
    s.usage.total_tokens = s.usage.prompt_tokens + u.output_tokens;
    s.usage.cached_tokens = u.cache_read_tokens;
    s.usage.reasoning_tokens = u.reasoning_tokens;
    s.ext["session_id"] = session_id;
    s.ext["api_calls"] = out.api_calls;
    s.ext["turn_exit_reason"] = turn_exit_reason(out);
    s.ext["completed"] = out.completed;
  }
  s.ok = has_answer && !failed;
  if (!s.ok)
    s.message = !err.empty()     ? err
                : s.interrupted ? "the turn was interrupted"
                                : "the turn produced no answer";
  return s;
}

} // namespace mibyan::serve
