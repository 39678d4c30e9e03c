// The dashboard's store endpoints without HTTP (serve/ui_ops.hpp): the
// routing shared by the server's own /ui/api/ store routes
// (serve/ui_connection.cpp) and a cluster gateway answering `mibyan
// dashboard --connect`.
#include <chrono>
#include <memory>

#include "runtime/turn_events.hpp"
#include "serve/ui_api.hpp"
#include "serve/ui_ops.hpp"
#include "storage/session_store.hpp"

namespace mibyan::serve {

bool is_ui_store_path(const std::string& path) {
  const std::string api = "/ui/api/";
  if (path.rfind(api, 0) != 0)
    return false;
  auto rest = path.substr(api.size());
  return rest == "sessions" || rest.rfind("sessions/", 0) == 0
         || rest == "search" || rest == "usage" || rest == "config";
}

ui_store_route route_ui_store(const std::string& method,
                              const std::string& rest,
                              const std::map<std::string, std::string>& query,
                              const ui_store_env& env) {
  ui_store_route out;
  auto early = [&](ops_response r) {
    out.has_early = true;
    out.early = std::move(r);
    return out;
  };
  auto bad = [&](const std::string& message) {
    return early(ops_error(400, message, "bad_parameter"));
  };
  bool get = method == "GET" || method == "HEAD";
  bool del = method == "DELETE";
  auto& id = out.session_id;
  if (rest.rfind("sessions/", 0) == 0) {
    id = rest.substr(9);
    const std::string suffix = "/export";
    if (id.size() > suffix.size()
        && id.compare(id.size() - suffix.size(), suffix.size(), suffix)
             == 0) {
      id.resize(id.size() - suffix.size());
      out.export_ = true;
    }
    if (!valid_session_id(id))
      return early(ops_error(400,
                             "malformed session id: 1 to 128 of A-Z a-z 0-9 "
                             "_ . : -",
                             "bad_session_id"));
    if (del ? out.export_ : !get)
      return early(ops_error(405, "method " + method
                                    + " is not allowed on this endpoint",
                             "method_not_allowed"));
  } else if (!get) {
    return early(ops_error(405, "method " + method
                                  + " is not allowed on this endpoint",
                           "method_not_allowed"));
  }
  if (rest == "sessions") {
    ui_list_call call;
    if (auto e = parse_count(query, "limit", 1, 1000, call.limit); !e.empty())
      return bad(e);
    if (auto e = parse_count(query, "offset", 0, 100'000'000, call.offset);
        !e.empty())
      return bad(e);
    if (auto i = query.find("source"); i != query.end())
      call.source = i->second;
    out.work = [call](session_store& st) {
      return ui_list_sessions(st, call);
    };
  } else if (rest == "search") {
    auto i = query.find("q");
    if (i == query.end()
        || i->second.find_first_not_of(' ') == std::string::npos)
      return bad("search needs a non-empty query parameter q");
    int64_t limit = 20;
    if (auto e = parse_count(query, "limit", 1, 500, limit); !e.empty())
      return bad(e);
    auto q = i->second;
    out.work = [q, limit](session_store& st) {
      return ui_search(st, q, limit);
    };
  } else if (rest == "usage") {
    int64_t days = 30;
    if (auto e = parse_count(query, "days", 1, 366, days); !e.empty())
      return bad(e);
    out.work = [days](session_store& st) {
      auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count();
      return ui_usage(st, days, now);
    };
  } else if (rest == "config") {
    auto eff = env.effective;
    if (!eff)
      return early(ops_error(503, "the configuration is not available here",
                             "config_unavailable"));
    out.work = [eff](session_store&) { return ui_config(*eff); };
  } else if (out.export_) {
    out.content_type = "application/x-ndjson";
    auto cap = env.max_export_bytes;
    out.work = [id = id, cap](session_store& st) {
      return ui_export(st, id, cap);
    };
  } else if (del) {
    auto busy = env.busy;
    auto deleted = env.deleted;
    out.work = [id = id, busy, deleted](session_store& st) {
      sessions_call call;
      call.id = id;
      call.del = true;
      // The same checks and effects as DELETE /v1/sessions/{id}.
      return run_sessions_call(st, call, busy, deleted);
    };
  } else {
    out.work = [id = id](session_store& st) { return ui_transcript(st, id); };
  }
  return out;
}

void answer_ui_store(runtime& rt, const ops_request& req, ops_done done) {
  auto* rtp = &rt;
  ui_store_env env;
  env.busy = [rtp](const std::string& sid) {
    for (auto& t : turn_events_of(*rtp).running())
      if (t.session_id == sid)
        return true;
    return false;
  };
  env.deleted = [rtp](const std::string& sid) { rtp->close_session(sid); };
  env.effective = std::make_shared<const options>(config_of(rt));
  env.max_export_bytes = config_of(rt).server.max_export_bytes;
  auto route = route_ui_store(
    req.method, req.path.substr(std::string{"/ui/api/"}.size()), req.query,
    env);
  if (route.has_early)
    return done(std::move(route.early));
  auto store = session_store_of(rt);
  if (!store)
    return done(ops_error(503, "the session store is unavailable",
                          "store_unavailable"));
  auto job = [store, work = route.work, type = route.content_type, done] {
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
