// The dashboard's routes on a `mibyan serve` connection (docs/serve.md
// "Dashboard"): the Host check and security headers of every /ui/ path,
// the embedded static files, login/logout/whoami, and the /ui/api/
// endpoints over the session store (run on the store pool).
#include <algorithm>

#include <boost/asio/post.hpp>

#include "base/json.hpp"
#include "serve/connection.hpp"
#include "serve/routes.hpp"
#include "serve/ui_api.hpp"
#include "serve/ui_assets.hpp"
#include "serve/ui_ops.hpp"
#include "storage/session_store.hpp"

namespace mibyan {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;

serve::ui_request serve_connection::ui_request_view() const {
  serve::ui_request r;
  r.method = std::string{req_.method_string()};
  r.host = std::string{req_[http::field::host]};
  r.authorization = std::string{req_[http::field::authorization]};
  for (auto& f : req_.base()) {
    if (f.name() == http::field::cookie) {
      if (!r.cookie.empty())
        r.cookie += "; ";
      r.cookie += std::string{f.value()};
    }
  }
  r.csrf = std::string{req_["X-CSRF-Token"]};
  r.origin = std::string{req_[http::field::origin]};
  r.client_addr = ticket_ ? ticket_->addr : std::string{"-"};
  r.tls = beast::iequals(req_["X-Forwarded-Proto"], "https");
  return r;
}

bool serve_connection::ui_authorised(bool state_changing) {
  auto v = srv_->ui_auth->authorise(ui_request_view(), state_changing);
  if (v.ok())
    return true;
  if (v.retry_after_s > 0)
    extra_headers_.emplace_back("Retry-After",
                                std::to_string(v.retry_after_s));
  send_error(static_cast<http::status>(v.status), v.message,
             "invalid_request_error", v.code);
  return false;
}

void serve_connection::ui(const std::string& path,
                          const std::map<std::string, std::string>& query) {
  auto& auth = *srv_->ui_auth;
  for (auto& [k, v] : serve::ui_auth::security_headers())
    extra_headers_.emplace_back(k, v);
  auto host = auth.check_host(std::string{req_[http::field::host]});
  if (!host.ok()) {
    send_error(static_cast<http::status>(host.status), host.message,
               "invalid_request_error", host.code);
    return;
  }
  auto method = req_.method();
  if (path == "/ui") {
    extra_headers_.emplace_back("Location", "/ui/");
    send_body(http::status::permanent_redirect, "text/plain; charset=utf-8",
              "/ui/\n");
    return;
  }
  const std::string api = "/ui/api/";
  if (path.rfind(api, 0) != 0) {
    // A static file: looked up in the embedded table only.
    if (method != http::verb::get)
      return method_not_allowed();
    auto* a = serve::find_ui_asset(path.substr(4));
    if (!a) {
      send_error(http::status::not_found, "no such file: " + path,
                 "invalid_request_error", "not_found");
      return;
    }
    extra_headers_.emplace_back("ETag", std::string{a->etag});
    extra_headers_.emplace_back("Cache-Control", "no-cache");
    auto inm = req_[http::field::if_none_match];
    if (!inm.empty()
        && serve::etag_matches(std::string_view{inm.data(), inm.size()},
                               a->etag)) {
      send_body(http::status::not_modified, std::string{a->content_type},
                {});
      return;
    }
    send_body(http::status::ok, std::string{a->content_type},
              std::string{a->body});
    return;
  }
  extra_headers_.emplace_back("Cache-Control", "no-store");
  auto rest = path.substr(api.size());
  if (rest == "login") {
    if (method != http::verb::post)
      return method_not_allowed();
    auto body = json::parse(req_.body());
    if (!body || !body.v->is_object() || !body.v->find("key")
        || !body.v->find("key")->is_string()) {
      send_error(http::status::bad_request,
                 "the body must be a JSON object {\"key\": \"...\"}",
                 "invalid_request_error", "bad_request");
      return;
    }
    auto r = auth.login(ui_request_view(), body.v->get_string("key"));
    if (!r.verdict.ok()) {
      if (r.verdict.retry_after_s > 0)
        extra_headers_.emplace_back("Retry-After",
                                    std::to_string(r.verdict.retry_after_s));
      send_error(static_cast<http::status>(r.verdict.status),
                 r.verdict.message, "invalid_request_error", r.verdict.code);
      return;
    }
    extra_headers_.emplace_back("Set-Cookie", r.set_cookie);
    json::value v;
    v["csrf"] = r.csrf;
    send_json(http::status::ok, v.dump());
    return;
  }
  if (rest == "logout") {
    if (method != http::verb::post)
      return method_not_allowed();
    if (!ui_authorised(true))
      return;
    extra_headers_.emplace_back("Set-Cookie",
                                auth.logout(ui_request_view()));
    send_json(http::status::ok, R"({"logged_in":false})");
    return;
  }
  if (rest == "whoami") {
    if (method != http::verb::get)
      return method_not_allowed();
    send_json(http::status::ok, auth.whoami_json(ui_request_view()));
    return;
  }
  // The operator console (serve/ui_live.cpp, serve/ui_ops.hpp), and every
  // other API request of `mibyan dashboard --connect` (the gateway's).
  if (srv_->cfg.ui_forward || rest == "live" || serve::is_ui_ops_path(path)) {
    if (!ui_authorised(method != http::verb::get
                       && method != http::verb::head))
      return;
    if (rest != "live")
      ui_ops(path, query);
    else if (method != http::verb::get)
      method_not_allowed();
    else
      live();
    return;
  }
  if (rest == "sessions" || rest.rfind("sessions/", 0) == 0
      || rest == "search" || rest == "usage" || rest == "config") {
    ui_store(rest, query);
    return;
  }
  send_error(http::status::not_found, "no such endpoint: " + path,
             "invalid_request_error", "not_found");
}

void serve_connection::ui_store(const std::string& rest,
                                const std::map<std::string, std::string>&
                                  query) {
  bool del = req_.method() == http::verb::delete_;
  if (!ui_authorised(del))
    return;
  // The routing is shared with a gateway's answer to `mibyan dashboard
  // --connect` (serve/ui_ops.hpp).
  auto srv = srv_;
  serve::ui_store_env env;
  env.busy = [srv](const std::string& sid) {
    std::lock_guard<std::mutex> g{srv->mtx};
    return srv->running.count(sid) > 0;
  };
  env.deleted = [srv](const std::string& sid) {
    srv->rt.close_session(sid);
    std::lock_guard<std::mutex> g{srv->mtx};
    srv->kept.erase(sid);
  };
  env.effective = srv_->cfg.effective;
  env.max_export_bytes = srv_->cfg.limits.max_export_bytes;
  auto route = serve::route_ui_store(std::string{req_.method_string()}, rest,
                                     query, env);
  if (route.has_early) {
    send_body(static_cast<http::status>(route.early.status),
              route.early.content_type, std::move(route.early.body));
    return;
  }
  auto work = std::move(route.work);
  auto& id = route.session_id;
  bool export_ = route.export_;
  // The id is [A-Za-z0-9_.:-] only (checked by the route): safe here.
  if (export_)
    extra_headers_.emplace_back("Content-Disposition",
                                "attachment; filename=\"" + id + ".jsonl\"");
  if (!id.empty())
    session_ = id;
  auto store = session_store_of(srv_->rt);
  if (!store) {
    store_unavailable();
    return;
  }
  hold_busy();
  std::string type = route.content_type;
  {
    std::lock_guard<std::mutex> g{srv->mtx};
    if (srv->store_closed) {
      send_error(http::status::service_unavailable,
                 "the server is shutting down", "server_error",
                 "shutting_down");
      return;
    }
  }
  net::post(srv->store_pool, [self = shared_from_this(), store, work, type] {
    auto r = work(*store);
    auto st = static_cast<http::status>(r.status);
    net::post(self->stream_.get_executor(),
              [self, st, r = std::move(r), type]() mutable {
                if (st == http::status::ok) {
                  self->send_body(st, type, std::move(r.body));
                  return;
                }
                auto& h = self->extra_headers_;
                h.erase(std::remove_if(h.begin(), h.end(),
                                       [](const auto& kv) {
                                         return kv.first
                                                == "Content-Disposition";
                                       }),
                        h.end());
                self->send_error(st, r.body,
                                   st == http::status::internal_server_error
                                     ? "server_error"
                                     : "invalid_request_error",
                                   r.code);
              });
  });
}

} // namespace mibyan
