// The operator endpoints of the dashboard API (serve/ui_ops.hpp).
#include "serve/ui_ops.hpp"

#include <memory>
#include <vector>

#include "base/json.hpp"
#include "base/log.hpp"
#include "runtime/turn_events.hpp"
#include "serve/openai_chat.hpp"
#include "serve/routes.hpp"
#include "serve/ui_jobs.hpp"
#include "tools/mcp/mcp_tools.hpp"

namespace mibyan::serve {

namespace {

ops_response no_endpoint(const std::string& path) {
  return ops_error(404, "no such endpoint: " + path, "not_found");
}

// Splits "/ui/api/<area>/<id>/<verb>" after `prefix` ("/ui/api/kernels/"):
// true with id and verb when the rest is exactly "<id>/<verb>" (the id
// percent-decoded).
bool split_id_verb(const std::string& path, const std::string& prefix,
                   std::string& id, std::string& verb) {
  if (path.rfind(prefix, 0) != 0)
    return false;
  auto rest = path.substr(prefix.size());
  auto slash = rest.find('/');
  if (slash == std::string::npos)
    return false;
  id = url_decode(rest.substr(0, slash));
  verb = rest.substr(slash + 1);
  return verb.find('/') == std::string::npos;
}

bool turn_running(runtime& rt, const std::string& sid) {
  for (auto& t : turn_events_of(rt).running())
    if (t.session_id == sid)
      return true;
  return false;
}

// -- live -----------------------------------------------------------------

void live_turns(runtime& rt, const ops_done& done) {
  std::string body = "{\"data\":[";
  bool first = true;
  for (auto& t : turn_events_of(rt).running()) {
    if (!first)
      body += ",";
    first = false;
    body += turn_event_hub::turn_json(t);
  }
  body += "]}";
  done(ops_json(std::move(body)));
}

void live_interrupt(runtime& rt, const std::string& sid, const ops_done& done) {
  if (!turn_running(rt, sid)) {
    done(ops_error(404, "no turn of session '" + sid + "' is running",
                  "turn_not_found"));
    return;
  }
  MIBYAN_LOG(info, "serve", "interrupting " << sid
                                            << " from the operator console");
  rt.interrupt(sid, "interrupted from the operator console");
  json::value v;
  v["session_id"] = sid;
  v["interrupted"] = true;
  done(ops_json(v.dump()));
}

// -- kernels ----------------------------------------------------------------

json::value kernel_json(const kernel_view& k, const std::string& node) {
  json::value v;
  v["session_id"] = k.session_id;
  v["pid"] = k.pid;
  v["node"] = node;
  v["mode"] = k.mode;
  v["sandbox"] = k.sandbox;
  v["uptime_s"] = k.uptime_s;
  v["cells"] = k.cells;
  v["rss_bytes"] = k.rss_bytes;
  v["busy"] = k.busy;
  return v;
}

void kernels_list(runtime& rt, const ui_ops_hooks& hooks,
                  const ops_done& done) {
  list_kernels(rt, [done, node = hooks.node_id](std::vector<kernel_view> ks,
                                                std::string err) {
    if (!err.empty()) {
      done(ops_error(503, err, "runtime_unavailable"));
      return;
    }
    json::value data = json::value::make_array();
    for (auto& k : ks)
      data.push_back(kernel_json(k, node));
    json::value v;
    v["data"] = std::move(data);
    done(ops_json(v.dump()));
  });
}

// reset: the session's kernels die, its conversation stays (a busy kernel
// is refused: interrupt the turn first). stop: close_session (kernels,
// conversation, the session's approvals and processes), refused while a
// turn of the session runs.
void kernel_action(runtime& rt, const std::string& sid,
                   const std::string& verb, const ops_done& done) {
  auto* rtp = &rt;
  list_kernels(rt, [rtp, sid, verb, done](std::vector<kernel_view> ks,
                                          std::string err) {
    // On the blocking pool.
    if (!err.empty()) {
      done(ops_error(503, err, "runtime_unavailable"));
      return;
    }
    bool found = false, busy = false;
    auto child = sid + "::child::";
    for (auto& k : ks)
      if (k.session_id == sid || k.session_id.rfind(child, 0) == 0) {
        found = true;
        busy = busy || k.busy;
      }
    if (!found) {
      done(ops_error(404, "session '" + sid + "' has no kernel",
                    "kernel_not_found"));
      return;
    }
    json::value v;
    v["session_id"] = sid;
    if (verb == "reset") {
      if (busy) {
        done(ops_error(409,
                      "a cell of session '" + sid
                        + "' is running; interrupt the turn first",
                      "kernel_busy"));
        return;
      }
      reset_kernels(*rtp, sid);
      v["reset"] = true;
    } else {
      if (turn_running(*rtp, sid)) {
        done(ops_error(409,
                      "a turn of session '" + sid
                        + "' is running; interrupt it first",
                      "session_busy"));
        return;
      }
      rtp->close_session(sid);
      v["stopped"] = true;
    }
    MIBYAN_LOG(info, "serve", "kernel " << verb << " of " << sid
                                        << " from the operator console");
    done(ops_json(v.dump()));
  });
}

// -- MCP ------------------------------------------------------------------

json::value mcp_json(const mcp_server_report& r) {
  json::value v;
  v["name"] = r.name;
  v["transport"] = r.transport;
  v["state"] = r.state;
  json::value tools = json::value::make_array();
  for (auto& t : r.tools)
    tools.push_back(t);
  v["tools"] = std::move(tools);
  v["last_error"] = r.error.empty() ? json::value{} : json::value{r.error};
  return v;
}

void mcp_list(runtime& rt, const ops_done& done) {
  json::value data = json::value::make_array();
  for (auto& r : mcp_servers_of(rt))
    data.push_back(mcp_json(r));
  json::value v;
  v["data"] = std::move(data);
  done(ops_json(v.dump()));
}

void mcp_reconnect(runtime& rt, const std::string& name, const ops_done& done) {
  bool known = false;
  for (auto& r : mcp_servers_of(rt))
    known = known || r.name == name;
  if (!known) {
    done(ops_error(404, "no MCP server '" + name + "' is configured",
                  "mcp_server_not_found"));
    return;
  }
  auto* rtp = &rt;
  auto job = [rtp, name, done] {
    auto st = reconnect_mcp(*rtp, name);
    if (!st && st.code == status_code::not_found) {
      done(ops_error(404, st.error, "mcp_server_not_found"));
      return;
    }
    json::value v;
    for (auto& r : mcp_servers_of(*rtp))
      if (r.name == name)
        v = mcp_json(r);
    if (!st) {
      done(ops_error(502, "reconnecting '" + name + "' failed: " + st.error,
                    "mcp_reconnect_failed"));
      return;
    }
    done(ops_json(v.dump()));
  };
  if (!run_blocking(rt, job))
    done(ops_error(503, "the runtime is shutting down",
                  "runtime_unavailable"));
}

} // namespace

ops_response ops_json(std::string body) {
  ops_response r;
  r.body = std::move(body);
  return r;
}

ops_response ops_method_not_allowed(const ops_request& req) {
  return ops_error(405,
                   "method " + req.method + " is not allowed on " + req.path,
                   "method_not_allowed");
}

ops_response ops_error(int status, const std::string& message,
                     const std::string& code) {
  ops_response r;
  r.status = status;
  r.body = error_body(message,
                      status >= 500 ? "server_error" : "invalid_request_error",
                      code);
  return r;
}

bool is_ui_ops_path(const std::string& path) {
  if (is_ui_jobs_path(path))
    return true;
  for (auto* p : {"/ui/api/live/", "/ui/api/kernels", "/ui/api/cluster",
                  "/ui/api/mcp"}) {
    std::string prefix{p};
    if (path == prefix
        || (path.rfind(prefix, 0) == 0
            && (prefix.back() == '/' || path[prefix.size()] == '/')))
      return true;
  }
  return false;
}

void answer_ui_ops(runtime& rt, const ui_ops_hooks& hooks,
                   const ops_request& req, ops_done done) {
  const auto& path = req.path;
  if (is_ui_jobs_path(path))
    return answer_ui_jobs(rt, req, std::move(done));
  bool get = req.method == "GET";
  bool post = req.method == "POST";
  std::string id, verb;
  if (path == "/ui/api/live/turns") {
    if (!get)
      return done(ops_method_not_allowed(req));
    return live_turns(rt, done);
  }
  if (split_id_verb(path, "/ui/api/live/", id, verb) && verb == "interrupt") {
    if (!post)
      return done(ops_method_not_allowed(req));
    if (!valid_session_id(id))
      return done(ops_error(400, "malformed session id", "bad_session_id"));
    return live_interrupt(rt, id, done);
  }
  if (path == "/ui/api/kernels") {
    if (!get)
      return done(ops_method_not_allowed(req));
    return kernels_list(rt, hooks, done);
  }
  if (split_id_verb(path, "/ui/api/kernels/", id, verb)
      && (verb == "reset" || verb == "stop")) {
    if (!post)
      return done(ops_method_not_allowed(req));
    if (!valid_session_id(id))
      return done(ops_error(400, "malformed session id", "bad_session_id"));
    return kernel_action(rt, id, verb, done);
  }
  if (path == "/ui/api/cluster") {
    if (!get)
      return done(ops_method_not_allowed(req));
    if (!hooks.cluster)
      return done(ops_json(R"({"enabled":false})"));
    return hooks.cluster([done](std::string body) {
      done(ops_json(std::move(body)));
    });
  }
  if (path == "/ui/api/mcp") {
    if (!get)
      return done(ops_method_not_allowed(req));
    return mcp_list(rt, done);
  }
  if (split_id_verb(path, "/ui/api/mcp/", id, verb) && verb == "reconnect") {
    if (!post)
      return done(ops_method_not_allowed(req));
    if (id.empty() || id.size() > 128)
      return done(ops_error(400, "malformed server name", "bad_server_name"));
    return mcp_reconnect(rt, id, done);
  }
  done(no_endpoint(path));
}

} // namespace mibyan::serve
