// The operator console's endpoints on a connection (docs/serve.md,
// "Operator console"): the live SSE stream of turn events
// (runtime/turn_events.hpp) and the dispatch of the other operator
// endpoints (serve/ui_ops.hpp), locally or forwarded to a cluster gateway
// (`mibyan dashboard --connect`).
//
// A live watcher's events wait in its bounded subscriber queue
// (server.live_buffer_events) and go out in batches: at most one write per
// `live_flush_interval`, and only once the previous write finished. So
// many watchers cost a turn one queue push each per event (no write, no
// post), and a watcher that does not read costs the turn nothing and at
// most that queue plus one batch and the socket buffer in memory; it
// loses events and gets a "lagged" event instead.
#include "serve/connection.hpp"

#include <boost/asio/post.hpp>

#include "base/log.hpp"
#include "serve/routes.hpp"
#include "serve/ui_ops.hpp"

namespace mibyan {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;

namespace {

// The kernel send buffer of a live stream: small, so a watcher that stops
// reading soon backs up into its (bounded) event queue.
constexpr int live_send_buffer = 64 * 1024;

// The longest an event waits before its watcher's next write (a
// dashboard needs no less; batching keeps the cost per event low).
constexpr auto live_flush_interval = std::chrono::milliseconds(100);

// The poll period of a forwarded live stream.
constexpr auto live_poll_period = std::chrono::seconds(1);

void append_frame(std::string& out, const std::string& name,
                  const std::string& data) {
  out += "event: ";
  out += name;
  out += "\ndata: ";
  out += data;
  out += "\n\n";
}

} // namespace

void serve_connection::live() {
  live_ = true;
  keep_alive_ = false; // the stream ends with the connection
  extra_headers_.emplace_back("X-Accel-Buffering", "no");
  beast::error_code ec;
  stream_.socket().set_option(net::socket_base::send_buffer_size(
                                live_send_buffer),
                              ec);
  if (srv_->cfg.ui_forward) {
    begin_sse();
    watch_disconnect();
    live_poll();
    return;
  }
  auto& hub = turn_events_of(srv_->rt);
  // Subscribe before the snapshot: a turn that starts in between shows in
  // both (harmless) rather than in neither.
  std::weak_ptr<serve_connection> weak = shared_from_this();
  std::weak_ptr<server_impl> wsrv = srv_;
  auto ex = stream_.get_executor();
  live_sub_ = hub.subscribe(
    static_cast<size_t>(srv_->cfg.limits.live_buffer_events),
    [weak, wsrv, ex] {
      // On the publishing runtime thread: only post.
      if (auto srv = wsrv.lock())
        srv->post_if_open(ex, [weak] {
          if (auto self = weak.lock())
            self->live_wake();
        });
    });
  begin_sse();
  push(hub.snapshot().sse);
  watch_disconnect();
}

void serve_connection::live_wake() {
  if (gone_ || !live_sub_ || live_armed_ || live_due_)
    return;
  live_armed_ = true;
  live_timer_.expires_after(live_flush_interval);
  live_timer_.async_wait(
    [self = shared_from_this()](beast::error_code ec) {
      self->live_armed_ = false;
      if (ec || self->gone_)
        return;
      self->live_due_ = true;
      self->pump();
    });
}

void serve_connection::live_refill() {
  if (!live_sub_)
    return;
  auto events = live_sub_->take();
  if (events.empty())
    return;
  size_t n = 0;
  for (auto& e : events)
    n += e->sse.size();
  std::string batch;
  batch.reserve(n);
  for (auto& e : events)
    batch += e->sse;
  last_output_ = std::chrono::steady_clock::now();
  out_.push_back(std::make_shared<std::string>(std::move(batch)));
}

void serve_connection::live_stop() {
  live_timer_.cancel();
  if (!live_sub_)
    return;
  turn_events_of(srv_->rt).unsubscribe(live_sub_);
  live_sub_.reset();
}

// A forwarded live stream: the gateway's running turns every second, as a
// "snapshot" event when they changed (docs/serve.md, "dashboard
// --connect"); no deltas or tool events cross the cluster.
void serve_connection::live_poll() {
  if (gone_ || !live_)
    return;
  serve::ops_request req;
  req.method = "GET";
  req.path = "/ui/api/live/turns";
  std::weak_ptr<serve_connection> weak = shared_from_this();
  auto srv = srv_;
  auto ex = stream_.get_executor();
  srv_->cfg.ui_forward(req, [weak, srv, ex](serve::ops_response r) {
    srv->post_if_open(ex, [weak, r = std::move(r)] {
      auto self = weak.lock();
      if (!self || self->gone_)
        return;
      if (r.status == 200) {
        auto parsed = json::parse(r.body);
        std::string turns = "[]";
        if (parsed && parsed.v->is_object())
          if (auto d = parsed.v->find("data"); d && d->is_array())
            turns = d->dump();
        if (turns != self->live_last_) {
          self->live_last_ = turns;
          std::string frame;
          append_frame(frame, "snapshot", "{\"turns\":" + turns + "}");
          self->push(std::move(frame));
        }
      } else {
        std::string frame;
        append_frame(frame, "error", r.body);
        self->push(std::move(frame));
      }
      self->live_timer_.expires_after(live_poll_period);
      self->live_timer_.async_wait([weak](beast::error_code ec) {
        if (auto s = weak.lock(); s && !ec)
          s->live_poll();
      });
    });
  });
}

void serve_connection::ui_ops(const std::string& path,
                              const std::map<std::string, std::string>&
                                query) {
  serve::ops_request req;
  req.method = std::string{req_.method_string()};
  req.path = path;
  req.query = query;
  req.body = std::move(req_.body());
  hold_busy();
  auto srv = srv_;
  auto ex = stream_.get_executor();
  // The answer may come on any thread: back to the strand.
  auto done = [self = shared_from_this(), srv, ex](serve::ops_response r) {
    srv->post_if_open(ex, [self, r = std::move(r)]() mutable {
      auto st = r.status >= 200 && r.status <= 599
                  ? static_cast<http::status>(r.status)
                  : http::status::bad_gateway;
      if (!r.content_type.empty() && r.content_type != "application/json")
        self->extra_headers_.emplace_back("Content-Type", r.content_type);
      self->send_json(st, std::move(r.body));
    });
  };
  if (srv_->cfg.ui_forward)
    srv_->cfg.ui_forward(std::move(req), std::move(done));
  else
    serve::answer_ui_ops(srv_->rt, srv_->cfg.ui, req, std::move(done));
}

} // namespace mibyan
