// File: serve/ui_ops.hpp
//
// The operator endpoints of the dashboard API without HTTP (docs/serve.md,
// "Operator console"): running turns and interrupt, kernels with reset and
// stop, the cluster view and the MCP servers. The server's connections
// call `answer_ui_ops` for these paths, and a cluster gateway calls it for
// the requests a `mibyan dashboard --connect` process forwards
// (cli/serve_command.cpp installs that), so both answer the same.
//
//   GET  /ui/api/live/turns                  {"data":[running turns]}
//   POST /ui/api/live/{session_id}/interrupt {"session_id","interrupted":true}
//   GET  /ui/api/kernels                     {"data":[{session_id,pid,node,
//                                            mode,sandbox,uptime_s,cells,
//                                            rss_bytes,busy}]}
//   POST /ui/api/kernels/{session_id}/reset  {"session_id","reset":true}
//   POST /ui/api/kernels/{session_id}/stop   {"session_id","stopped":true}
//   GET  /ui/api/cluster                     {"enabled":false} or the hook's
//   GET  /ui/api/mcp                         {"data":[{name,transport,state,
//                                            tools,last_error}]}
//   POST /ui/api/mcp/{name}/reconnect        {name,state,tools,last_error}
//   /ui/api/jobs...                          scheduled jobs (serve/ui_jobs.hpp)
// Errors: the serve error shape with 400 (malformed id), 404 (unknown
// session, kernel or server; unknown path), 405 (method), 409 (busy),
// 502 (reconnect failed), 503 (runtime stopping).
//
// Beast-free. `answer_ui_ops` never blocks its caller: blocking work
// (/proc reads, close_session, MCP connects) runs on the runtime's
// blocking pool; `done` is called once, on any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "runtime/runtime.hpp"
#include "serve/routes.hpp"

namespace mibyan::serve {

/// One dashboard API request without its HTTP framing.
struct ops_request {
  std::string method; // "GET", "POST", ...
  std::string path;   // "/ui/api/kernels"
  std::map<std::string, std::string> query;
  std::string body;
};

/// Its answer.
struct ops_response {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
};

using ops_done = std::function<void(ops_response)>;

/// What the operator endpoints need besides the runtime; the composition
/// root (cli/) fills them.
struct ui_ops_hooks {
  /// This node's cluster id, shown as each kernel's "node" ("" outside a
  /// cluster).
  std::string node_id;
  /// Answers the /ui/api/cluster JSON ({"enabled":true,"members":[...]})
  /// through its callback, once, on any thread; null when this server is
  /// not a cluster member ({"enabled":false}).
  std::function<void(std::function<void(std::string)>)> cluster;
};

/// Whether `path` is answered by answer_ui_ops (the live SSE stream
/// itself, /ui/api/live, is not: it needs the connection).
bool is_ui_ops_path(const std::string& path);

/// Answers `req` (a path for which is_ui_ops_path holds).
void answer_ui_ops(runtime& rt, const ui_ops_hooks& hooks,
                   const ops_request& req, ops_done done);

/// Whether `path` is one of the dashboard's store endpoints (sessions,
/// search, usage, config, sessions/{id}[/export]).
bool is_ui_store_path(const std::string& path);

/// What routing a store endpoint needs from the server that answers it.
struct ui_store_env {
  /// Whether a turn of the session runs (a delete is then refused).
  std::function<bool(const std::string&)> busy;
  /// After a delete: close what the node holds of the session.
  std::function<void(const std::string&)> deleted;
  /// The configuration GET /ui/api/config shows (null: 503).
  std::shared_ptr<const options> effective;
  int64_t max_export_bytes = 0;
};

/// A store endpoint request, routed: an answer at once (`early`: 400,
/// 405, 503) or the store work (serve/ui_api.hpp; blocking: LMDB) and the
/// content type of its success.
struct ui_store_route {
  bool has_early = false;
  ops_response early;
  std::function<api_reply(session_store&)> work;
  std::string content_type = "application/json";
  /// The session id of /sessions/{id}[/export] ("" otherwise).
  std::string session_id;
  bool export_ = false;
};

/// Routes `method` on /ui/api/`rest` (`rest`: "sessions", "search",
/// "usage", "config", "sessions/{id}[/export]"). The server's own
/// /ui/api/ store routes (serve/ui_connection.cpp) and answer_ui_store
/// both use it, so their answers agree.
ui_store_route route_ui_store(const std::string& method,
                              const std::string& rest,
                              const std::map<std::string, std::string>& query,
                              const ui_store_env& env);

/// Answers a store endpoint request without HTTP (route_ui_store with the
/// runtime's running turns, close_session and configuration); store work
/// runs on the runtime's blocking pool. For a gateway answering `mibyan
/// dashboard --connect`.
void answer_ui_store(runtime& rt, const ops_request& req, ops_done done);

/// An error answer in the serve error shape.
ops_response ops_error(int status, const std::string& message,
                     const std::string& code);

/// A 200 answer with the JSON text `body`.
ops_response ops_json(std::string body);

/// The 405 answer for a method `req.path` does not take.
ops_response ops_method_not_allowed(const ops_request& req);

} // namespace mibyan::serve
