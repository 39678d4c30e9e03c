// The dashboard's store endpoints without HTTP (serve/ui_ops.hpp,
// answer_ui_store): the same functions and parameter rules as the
// server's own /ui/api/ store routes (serve/ui_connection.cpp, ui_store),
// for a cluster gateway answering `mibyan dashboard --connect`.
#include <chrono>
#include <memory>

#include "runtime/turn_events.hpp"
#include "serve/ui_api.hpp"
#include "serve/ui_ops.hpp"
#include "storage/session_store.hpp"

namespace mibyan::serve {

namespace {

bool turn_running(runtime& rt, const std::string& sid) {
  for (auto& t : turn_events_of(rt).running())
    if (t.session_id == sid)
      return true;
  return false;
}

} // namespace

bool is_ui_store_path(const std::string& path) {
  const std::string api = "/ui/api/";
  if (path.rfind(api, 0) != 0)
    return false;
  auto rest = path.substr(api.size());
  return rest == "sessions" || rest.rfind("sessions/", 0) == 0
         || rest == "search" || rest == "usage" || rest == "config";
}

void answer_ui_store(runtime& rt, const ops_request& req, ops_done done) {
  auto rest = req.path.substr(std::string{"/ui/api/"}.size());
  const auto& query = req.query;
  bool get = req.method == "GET" || req.method == "HEAD";
  bool del = req.method == "DELETE";
  auto not_allowed = [&] {
    done(ops_error(405, "method " + req.method + " is not allowed on "
                          + req.path,
                   "method_not_allowed"));
  };
  auto bad = [&](const std::string& message) {
    done(ops_error(400, message, "bad_parameter"));
  };
  std::string id;
  bool export_ = false;
  if (rest.rfind("sessions/", 0) == 0) {
    id = rest.substr(9);
    const std::string suffix = "/export";
    if (id.size() > suffix.size()
        && id.compare(id.size() - suffix.size(), suffix.size(), suffix)
             == 0) {
      id.resize(id.size() - suffix.size());
      export_ = true;
    }
    if (!valid_session_id(id))
      return done(ops_error(400,
                            "malformed session id: 1 to 128 of A-Z a-z 0-9 "
                            "_ . : -",
                            "bad_session_id"));
    if (del ? export_ : !get)
      return not_allowed();
  } else if (!get) {
    return not_allowed();
  }
  auto* rtp = &rt;
  std::function<api_reply(session_store&)> work;
  if (rest == "sessions") {
    ui_list_call call;
    if (auto e = parse_count(query, "limit", 1, 1000, call.limit); !e.empty())
      return bad(e);
    if (auto e = parse_count(query, "offset", 0, 100'000'000, call.offset);
        !e.empty())
      return bad(e);
    if (auto i = query.find("source"); i != query.end())
      call.source = i->second;
    work = [call](session_store& st) { return ui_list_sessions(st, call); };
  } else if (rest == "search") {
    auto i = query.find("q");
    if (i == query.end()
        || i->second.find_first_not_of(' ') == std::string::npos)
      return bad("search needs a non-empty query parameter q");
    int64_t limit = 20;
    if (auto e = parse_count(query, "limit", 1, 500, limit); !e.empty())
      return bad(e);
    auto q = i->second;
    work = [q, limit](session_store& st) { return ui_search(st, q, limit); };
  } else if (rest == "usage") {
    int64_t days = 30;
    if (auto e = parse_count(query, "days", 1, 366, days); !e.empty())
      return bad(e);
    work = [days](session_store& st) {
      auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count();
      return ui_usage(st, days, now);
    };
  } else if (rest == "config") {
    work = [rtp](session_store&) { return ui_config(rtp->config()); };
  } else if (export_) {
    auto cap = rt.config().server.max_export_bytes;
    work = [id, cap](session_store& st) { return ui_export(st, id, cap); };
  } else if (del) {
    work = [id, rtp](session_store& st) {
      sessions_call call;
      call.id = id;
      call.del = true;
      // The same checks and effects as DELETE /v1/sessions/{id}.
      return run_sessions_call(
        st, call,
        [rtp](const std::string& sid) { return turn_running(*rtp, sid); },
        [rtp](const std::string& sid) { rtp->close_session(sid); });
    };
  } else {
    work = [id](session_store& st) { return ui_transcript(st, id); };
  }
  auto store = session_store_of(rt);
  if (!store)
    return done(ops_error(503, "the session store is unavailable",
                          "store_unavailable"));
  std::string type = export_ ? "application/x-ndjson" : "application/json";
  auto job = [store, work, type, done] {
    auto r = work(*store);
    if (r.status != 200)
      return done(ops_error(r.status, r.body, r.code));
    ops_response out;
    out.content_type = type;
    out.body = std::move(r.body);
    done(std::move(out));
  };
  if (!run_blocking(rt, job))
    done(ops_error(503, "the runtime is shutting down",
                   "runtime_unavailable"));
}

} // namespace mibyan::serve
