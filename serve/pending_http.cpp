// Pending approvals and questions over HTTP (docs/serve.md, "Approvals
// and questions over HTTP"): the /v1/approvals and /v1/clarifications
// endpoints of a connection, and the `approval_required` /
// `clarify_required` events on a streamed turn of the session that waits.
// The registry calls never block (runtime/pending_approvals.hpp), so they
// run on the connection's strand. Authorised like the dashboard's API (the
// bearer key, or the `mibyan_ui` cookie with X-CSRF-Token on a POST).
#include "serve/connection.hpp"

#include "serve/openai_chat.hpp"
#include "serve/pending_routes.hpp"

namespace mibyan {

namespace beast = boost::beast;
namespace http = beast::http;

void serve_connection::pending(const std::string& path,
                               const std::string& prefix,
                               const std::map<std::string, std::string>& query,
                               pending_kind kind) {
  std::string id = path.size() > prefix.size() + 1
                     ? path.substr(prefix.size() + 1)
                     : std::string{};
  auto method = req_.method();
  // The bearer key, or the dashboard's cookie plus its X-CSRF-Token for an
  // answer (serve/ui_auth.hpp); on false the error has been sent.
  if (!ui_authorised(method != http::verb::get && method != http::verb::head))
    return;
  const auto& c = config_of(srv_->rt);
  bool enabled = kind == pending_kind::approval ? c.approvals.http == "pending"
                                                : c.clarify.http == "pending";
  serve::api_reply r;
  if (id.empty()) {
    if (method != http::verb::get)
      return method_not_allowed();
    auto i = query.find("session");
    r = serve::list_pending(srv_->rt, kind, enabled,
                            i == query.end() ? std::string{} : i->second);
  } else {
    if (method != http::verb::post)
      return method_not_allowed();
    if (!json_body())
      return;
    r = serve::answer_pending(srv_->rt, kind, id, req_.body());
  }
  auto st = static_cast<http::status>(r.status);
  if (st == http::status::ok)
    send_json(st, std::move(r.body));
  else
    send_error(st, r.body, "invalid_request_error", r.code);
}

void serve_connection::watch_pending() {
  unwatch_pending();
  auto weak = std::weak_ptr<serve_connection>(shared_from_this());
  auto ex = stream_.get_executor();
  // Its own session and its subagents' ("<session>::child::...").
  auto session = session_;
  auto child = session_ + "::child::";
  pending_watch_ = srv_->rt.watch_pending(
    [weak, ex, session, child](const pending_event& e) {
      const auto& s = e.request.session_id;
      if (s != session && s.compare(0, child.size(), child) != 0)
        return;
      if (auto self = weak.lock())
        self->srv_->post_if_open(ex, [self, e] { self->on_pending(e); });
    });
}

void serve_connection::unwatch_pending() {
  if (pending_watch_ != 0) {
    srv_->rt.unwatch_pending(pending_watch_);
    pending_watch_ = 0;
  }
}

void serve_connection::on_pending(const pending_event& e) {
  if (gone_ || !stream_mode_ || !in_turn_)
    return;
  auto ev = pending_event_json(e);
  if (api_ == turn_api::responses) {
    // The Responses stream: a `mibyan.<type>` event of its own.
    auto name = ev.get_string("type", "");
    response_extension(name, std::move(ev));
    return;
  }
  push(chunk_event(id_, created_, model_, json::value{}, "", std::move(ev)));
}

} // namespace mibyan
