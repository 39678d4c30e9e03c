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
#include "storage/session_store.hpp"

namespace mibyan {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;

namespace {

// The session id of /ui/api/sessions/{id}[/export] ("" when malformed).
bool split_session_path(const std::string& rest, std::string& id,
                        bool& export_) {
  export_ = false;
  id = rest;
  const std::string suffix = "/export";
  if (id.size() > suffix.size()
      && id.compare(id.size() - suffix.size(), suffix.size(), suffix) == 0) {
    id.resize(id.size() - suffix.size());
    export_ = true;
  }
  return serve::valid_session_id(id);
}

} // namespace

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
  auto method = req_.method();
  bool del = method == http::verb::delete_;
  std::string id;
  bool export_ = false;
  bool one = rest.rfind("sessions/", 0) == 0;
  if (one) {
    if (!split_session_path(rest.substr(9), id, export_)) {
      send_error(http::status::bad_request,
                 "malformed session id: 1 to 128 of A-Z a-z 0-9 _ . : -",
                 "invalid_request_error", "bad_session_id");
      return;
    }
    if (del ? export_ : method != http::verb::get)
      return method_not_allowed();
  } else if (method != http::verb::get) {
    return method_not_allowed();
  }
  if (!ui_authorised(del))
    return;
  auto bad = [this](const std::string& message) {
    send_error(http::status::bad_request, message, "invalid_request_error",
               "bad_parameter");
  };
  std::function<serve::api_reply(session_store&)> work;
  if (rest == "sessions") {
    serve::ui_list_call call;
    if (auto e = serve::parse_count(query, "limit", 1, 1000, call.limit);
        !e.empty())
      return bad(e);
    if (auto e = serve::parse_count(query, "offset", 0, 100'000'000,
                                    call.offset);
        !e.empty())
      return bad(e);
    if (auto i = query.find("source"); i != query.end())
      call.source = i->second;
    work = [call](session_store& st) {
      return serve::ui_list_sessions(st, call);
    };
  } else if (rest == "search") {
    auto i = query.find("q");
    if (i == query.end()
        || i->second.find_first_not_of(' ') == std::string::npos)
      return bad("search needs a non-empty query parameter q");
    int64_t limit = 20;
    if (auto e = serve::parse_count(query, "limit", 1, 500, limit);
        !e.empty())
      return bad(e);
    auto q = i->second;
    work = [q, limit](session_store& st) {
      return serve::ui_search(st, q, limit);
    };
  } else if (rest == "usage") {
    int64_t days = 30;
    if (auto e = serve::parse_count(query, "days", 1, 366, days); !e.empty())
      return bad(e);
    work = [days](session_store& st) {
      auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count();
      return serve::ui_usage(st, days, now);
    };
  } else if (rest == "config") {
    auto eff = srv_->cfg.effective;
    if (!eff) {
      send_error(http::status::service_unavailable,
                 "the configuration is not available here", "server_error",
                 "config_unavailable");
      return;
    }
    work = [eff](session_store&) { return serve::ui_config(*eff); };
  } else if (export_) {
    // The id is [A-Za-z0-9_.:-] only (checked above): safe in the header.
    extra_headers_.emplace_back("Content-Disposition",
                                "attachment; filename=\"" + id + ".jsonl\"");
    auto cap = srv_->cfg.limits.max_export_bytes;
    work = [id, cap](session_store& st) {
      return serve::ui_export(st, id, cap);
    };
  } else if (del) {
    auto srv = srv_;
    work = [id, srv](session_store& st) {
      serve::sessions_call call;
      call.id = id;
      call.del = true;
      // The same checks and effects as DELETE /v1/sessions/{id}.
      return serve::run_sessions_call(
        st, call,
        [srv](const std::string& sid) {
          std::lock_guard<std::mutex> g{srv->mtx};
          return srv->running.count(sid) > 0;
        },
        [srv](const std::string& sid) {
          srv->rt.close_session(sid);
          std::lock_guard<std::mutex> g{srv->mtx};
          srv->kept.erase(sid);
        });
    };
  } else {
    work = [id](session_store& st) { return serve::ui_transcript(st, id); };
  }
  if (!id.empty())
    session_ = id;
  auto store = session_store_of(srv_->rt);
  if (!store) {
    send_error(http::status::service_unavailable,
               "the session store is unavailable", "server_error",
               "store_unavailable");
    return;
  }
  hold_busy();
  auto srv = srv_;
  std::string type = export_ ? "application/x-ndjson" : "application/json";
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
