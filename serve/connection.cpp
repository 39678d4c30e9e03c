// One HTTP connection of `mibyan serve` (docs/serve.md): admission,
// reading a request, routing, the sessions endpoints and plain responses.
// Chat turns and streaming are in serve/chat.cpp.
#include "serve/connection.hpp"

#include <sys/socket.h>

#include <cstring>

#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>

#include "base/json.hpp"
#include "base/log.hpp"
#include "serve/metrics_route.hpp"
#include "serve/openai_chat.hpp"
#include "serve/routes.hpp"
#include "storage/session_store.hpp"

namespace mibyan {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

serve_connection::serve_connection(std::shared_ptr<server_impl> srv,
                                   tcp::socket sock)
  : srv_(std::move(srv)),
    stream_(std::move(sock)),
    head_deadline_(stream_.get_executor()),
    keepalive_(stream_.get_executor()),
    live_timer_(stream_.get_executor()) {}

serve_connection::~serve_connection() {
  live_stop();
  unwatch_pending();
  release_busy();
  if (ticket_)
    srv_->gate.release(*ticket_);
}

void serve_connection::start(std::string addr) {
  ticket_ = std::make_shared<conn_ticket>();
  ticket_->addr = std::move(addr);
  // The tables hold the ticket weakly and its callbacks hold the
  // connection weakly: admission never keeps a connection alive.
  std::weak_ptr<serve_connection> weak = shared_from_this();
  auto ex = stream_.get_executor();
  auto srv = srv_;
  ticket_->evict = [weak, ex, srv] {
    srv->post_if_open(ex, [weak] {
      auto self = weak.lock();
      if (self && self->reading_head_) { // not if a request came meanwhile
        self->hurried_ = true;
        self->stream_.close(); // the head read ends: read_failed
      }
    });
  };
  ticket_->hurry = [weak, ex, srv] {
    srv->post_if_open(ex, [weak] {
      if (auto self = weak.lock())
        self->hurry();
    });
  };
  if (!srv_->gate.admit(ticket_)) {
    beast::error_code ec;
    stream_.socket().close(ec);
    return;
  }
  net::dispatch(stream_.get_executor(),
                [self = shared_from_this()] { self->read_request(); });
}

// -- admission ----------------------------------------------------------------

void serve_connection::set_waiting_head(bool waiting) {
  if (reading_head_ == waiting)
    return;
  reading_head_ = waiting;
  srv_->gate.set_waiting(*ticket_, waiting);
  if (!waiting)
    head_deadline_.cancel();
}

void serve_connection::hurry() {
  if (!reading_head_)
    return;
  head_deadline_.expires_after(admission::pressure_header_timeout);
  head_deadline_.async_wait(
    [self = shared_from_this()](beast::error_code ec) {
      if (ec || !self->reading_head_)
        return;
      self->hurried_ = true;
      self->stream_.close(); // the head read ends: read_failed
    });
}

void serve_connection::read_request() {
  if (srv_->stopping) {
    close();
    return;
  }
  parser_.emplace();
  parser_->header_limit(static_cast<uint32_t>(srv_->cfg.limits
                                                .max_header_bytes));
  parser_->body_limit(static_cast<uint64_t>(srv_->cfg.limits
                                              .max_body_bytes));
  // An idle keep-alive connection and a slow head share this deadline;
  // under pressure it is short (serve/admission.cpp).
  std::chrono::steady_clock::duration limit = std::chrono::seconds(
    first_ ? srv_->cfg.limits.header_timeout
           : srv_->cfg.limits.idle_timeout);
  if (srv_->gate.under_pressure())
    limit = std::min(limit, std::chrono::steady_clock::duration{
                              admission::pressure_header_timeout});
  stream_.expires_after(limit);
  first_ = false;
  hurried_ = false;
  set_waiting_head(true);
  http::async_read_header(stream_, buffer_, *parser_,
                          [self = shared_from_this()](beast::error_code ec,
                                                      size_t) {
                            self->on_header(ec);
                          });
}

void serve_connection::on_header(beast::error_code ec) {
  set_waiting_head(false);
  if (ec) {
    read_failed(ec);
    return;
  }
  start_ = std::chrono::steady_clock::now();
  stream_.expires_after(std::chrono::seconds(srv_->cfg.limits.body_timeout));
  auto& head = parser_->get();
  if (beast::iequals(head[http::field::expect], "100-continue")
      && !parser_->is_done()) {
    // curl and others wait for this before sending a larger body.
    auto cont = std::make_shared<http::response<http::empty_body>>(
      http::status::continue_, head.version());
    http::async_write(stream_, *cont,
                      [self = shared_from_this(), cont](beast::error_code ec,
                                                        size_t) {
                        if (ec)
                          return self->close();
                        self->read_body();
                      });
    return;
  }
  read_body();
}

void serve_connection::read_body() {
  http::async_read(stream_, buffer_, *parser_,
                   [self = shared_from_this()](beast::error_code ec,
                                               size_t) {
                     self->on_body(ec);
                   });
}

// A request could not be read: answer when the socket still works, then
// close (the stream position is unknown).
void serve_connection::read_failed(beast::error_code ec) {
  if (ec == http::error::end_of_stream || ec == net::error::eof
      || ec == beast::error::timeout || ec == net::error::operation_aborted
      || ec == net::error::connection_reset) {
    // A request started but not finished in time (slow head or body, or
    // a head cut short by admission): one access line with 408; an idle
    // keep-alive connection closes silently.
    if ((ec == beast::error::timeout || hurried_)
        && (buffer_.size() > 0 || start_ != decltype(start_){})) {
      if (start_ == decltype(start_){})
        start_ = std::chrono::steady_clock::now();
      auto m = parser_ ? parser_->get().method_string()
                       : beast::string_view{};
      auto t = parser_ ? parser_->get().target() : beast::string_view{};
      method_ = m.empty() ? "-" : std::string{m};
      path_ = t.empty() ? "-" : std::string{t};
      status_ = 408;
      log_access();
    }
    close();
    return;
  }
  if (start_ == std::chrono::steady_clock::time_point{})
    start_ = std::chrono::steady_clock::now();
  // The request line may be known even when the head failed.
  auto m = parser_ ? parser_->get().method_string() : beast::string_view{};
  auto t = parser_ ? parser_->get().target() : beast::string_view{};
  method_ = m.empty() ? "-" : std::string{m};
  path_ = t.empty() ? "-" : std::string{t};
  keep_alive_ = false;
  lingering_ = true;
  if (ec == http::error::header_limit)
    send_error(http::status::request_header_fields_too_large,
               "the request head is larger than server.max_header_bytes ("
                 + std::to_string(srv_->cfg.limits.max_header_bytes)
                 + " bytes)",
               "invalid_request_error", "header_too_large");
  else if (ec == http::error::body_limit)
    send_error(http::status::payload_too_large,
               "the request body is larger than server.max_body_bytes ("
                 + std::to_string(srv_->cfg.limits.max_body_bytes)
                 + " bytes)",
               "invalid_request_error", "body_too_large");
  else
    send_error(http::status::bad_request,
               "malformed HTTP request: " + ec.message(),
               "invalid_request_error", "bad_request");
}

void serve_connection::on_body(beast::error_code ec) {
  if (ec) {
    read_failed(ec);
    return;
  }
  stream_.expires_never();
  req_ = parser_->release();
  keep_alive_ = req_.keep_alive();
  method_ = std::string{req_.method_string()};
  path_ = std::string{req_.target()};
  session_.clear();
  handle();
}

void serve_connection::handle() {
  std::string path;
  std::map<std::string, std::string> query;
  auto target = req_.target();
  serve::split_target(std::string_view{target.data(), target.size()}, path,
               query);
  auto method = req_.method();
  if (path == "/health") {
    if (method != http::verb::get)
      return method_not_allowed();
    send_json(http::status::ok, R"({"status":"ok"})");
    return;
  }
  if (path == "/ui" || path.rfind("/ui/", 0) == 0) {
    ui(path, query);
    return;
  }
  if (path == "/metrics") { // serve/metrics_route.cpp
    if (method != http::verb::get)
      return method_not_allowed();
    auto auth = req_[http::field::authorization];
    auto r = serve::metrics_response(srv_->cfg.host, srv_->cfg.key,
                                     {auth.data(), auth.size()});
    if (r.status != 200)
      return send_error(static_cast<http::status>(r.status), r.message,
                        "invalid_request_error", r.code);
    extra_headers_.emplace_back("Content-Type", metrics::content_type);
    send_json(http::status::ok, std::move(r.body));
    return;
  }
  // The dashboard answers these too: the bearer key or its cookie (and
  // CSRF token), checked in pending().
  for (auto [prefix, kind] :
       {std::pair{"/v1/approvals", pending_kind::approval},
        std::pair{"/v1/clarifications", pending_kind::clarify}}) {
    auto n = std::strlen(prefix);
    if (path.rfind(prefix, 0) == 0 && (path.size() == n || path[n] == '/')) {
      pending(path, prefix, query, kind);
      return;
    }
  }
  if (!authorized()) {
    send_error(http::status::unauthorized,
               "missing or wrong API key: send 'Authorization: Bearer "
               "<key>' with the server key",
               "invalid_request_error", "invalid_api_key");
    return;
  }
  if (path == "/v1/models") {
    if (method != http::verb::get)
      return method_not_allowed();
    json::value m;
    m["id"] = srv_->cfg.model_id;
    m["object"] = "model";
    m["created"] = int64_t{0};
    m["owned_by"] = "mibyan";
    json::value v;
    v["object"] = "list";
    v["data"] = json::value::make_array();
    v["data"].push_back(std::move(m));
    send_json(http::status::ok, v.dump());
    return;
  }
  if (path == "/v1/chat/completions") {
    if (method != http::verb::post)
      return method_not_allowed();
    chat();
    return;
  }
  if (path == "/v1/responses" || path.rfind("/v1/responses/", 0) == 0) {
    responses(path);
    return;
  }
  if (path == "/v1/sessions" || path.rfind("/v1/sessions/", 0) == 0) {
    sessions(path, query);
    return;
  }
  send_error(http::status::not_found, "no such endpoint: " + path,
             "invalid_request_error", "not_found");
}

bool serve_connection::authorized() {
  const auto& key = srv_->cfg.key;
  if (key.empty())
    return true;
  auto h = req_[http::field::authorization];
  std::string given{h};
  const std::string prefix = "Bearer ";
  if (given.size() < prefix.size()
      || !beast::iequals(given.substr(0, prefix.size()), prefix))
    return false;
  return constant_time_equal(given.substr(prefix.size()), key);
}

void serve_connection::method_not_allowed() {
  send_error(http::status::method_not_allowed,
             "method " + method_ + " is not allowed on this endpoint",
             "invalid_request_error", "method_not_allowed");
}

void serve_connection::store_unavailable() {
  send_error(http::status::service_unavailable,
             "the session store is unavailable", "server_error",
             "store_unavailable");
}

void serve_connection::sessions(const std::string& path,
                                const std::map<std::string, std::string>&
                                  query) {
  auto store = session_store_of(srv_->rt);
  if (!store) {
    store_unavailable();
    return;
  }
  size_t limit = 20;
  if (!serve::parse_limit(query, limit)) {
    send_error(http::status::bad_request,
               "limit must be an integer from 1 to 1000",
               "invalid_request_error", "bad_limit");
    return;
  }
  std::string id = path.size() > 13 ? path.substr(13) : "";
  auto method = req_.method();
  bool search = id == "search";
  if (search || id.empty()) {
    if (method != http::verb::get)
      return method_not_allowed();
  } else if (method != http::verb::get && method != http::verb::delete_) {
    return method_not_allowed();
  }
  std::string q;
  if (search) {
    auto i = query.find("q");
    if (i == query.end()
        || i->second.find_first_not_of(' ') == std::string::npos) {
      send_error(http::status::bad_request,
                 "search needs a non-empty query parameter q",
                 "invalid_request_error", "missing_query");
      return;
    }
    q = i->second;
  }
  if (!id.empty() && !search)
    session_ = id;
  std::string role = query.count("role") ? query.at("role") : "";
  std::string only = query.count("session") ? query.at("session") : "";
  bool del = method == http::verb::delete_;
  hold_busy();
  auto srv = srv_;
  // Store work (LMDB; deletes wait for fsync) off the I/O thread.
  serve::sessions_call call;
  call.id = id;
  call.search = search;
  call.del = del;
  call.q = q;
  call.role = role;
  call.only_session = only;
  call.limit = limit;
  net::post(srv->store_pool, [self = shared_from_this(), srv, store,
                              call] {
    auto r = serve::run_sessions_call(
      *store, call,
      [srv](const std::string& sid) {
        std::lock_guard<std::mutex> g{srv->mtx};
        return srv->running.count(sid) > 0;
      },
      [srv](const std::string& sid) {
        srv->rt.close_session(sid);
        std::lock_guard<std::mutex> g{srv->mtx};
        srv->kept.erase(sid);
      });
    auto st = static_cast<http::status>(r.status);
    auto body = std::move(r.body);
    auto code = std::move(r.code);
    net::post(self->stream_.get_executor(), [self, srv, st, body, code] {
      if (st == http::status::ok)
        self->send_json(st, body);
      else
        self->send_error(st, body,
                         st == http::status::internal_server_error
                           ? "server_error"
                           : "invalid_request_error",
                         code);
    });
  });
}

void serve_connection::send_error(http::status st, const std::string& message,
                                  const std::string& type,
                                  const std::string& code) {
  send_json(st, error_body(message, type, code));
}

void serve_connection::send_json(http::status st, std::string body) {
  send_body(st, "application/json", std::move(body));
}

void serve_connection::send_body(http::status st, const std::string& type,
                                 std::string body) {
  auto res = std::make_shared<string_response>(st, req_.version() == 0
                                                     ? 11
                                                     : req_.version());
  res->set(http::field::server, "mibyan");
  if (st != http::status::not_modified)
    res->set(http::field::content_type, type);
  for (auto& [k, v] : extra_headers_)
    res->set(k, v);
  extra_headers_.clear();
  res->keep_alive(keep_alive_ && !srv_->stopping);
  res->body() = std::move(body);
  res->prepare_payload();
  status_ = static_cast<int>(st);
  http::async_write(stream_, *res,
                    [self = shared_from_this(), res](beast::error_code ec,
                                                     size_t) {
                      self->log_access();
                      if (!ec && self->lingering_)
                        self->linger_close();
                      else if (ec || !res->keep_alive())
                        self->close();
                      else
                        self->read_request();
                    });
}

// A response in production counts for the graceful shutdown until it is
// written (or the connection closes).
void serve_connection::hold_busy() {
  if (!holds_busy_) {
    holds_busy_ = true;
    srv_->begin_busy();
  }
}

void serve_connection::release_busy() {
  if (holds_busy_) {
    holds_busy_ = false;
    srv_->end_busy();
  }
}

void serve_connection::log_access() {
  release_busy();
  auto ms = std::chrono::duration<double, std::milli>(
              std::chrono::steady_clock::now() - start_)
              .count();
  char dur[32];
  std::snprintf(dur, sizeof dur, "%.1fms", ms);
  MIBYAN_LOG(info, "serve",
             method_ << " " << path_ << " " << status_ << " " << dur
                     << " session=" << (session_.empty() ? "-" : session_));
  serve::note_request(path_, status_, ms / 1000);
  session_.clear();
  stateful_ = false;
  stream_mode_ = false;
  api_ = turn_api::chat;
  resp_.reset();
  round_text_.clear();
  start_ = {};
}

// After answering a request we did not read in full: stop sending, read
// and drop what the client still sends (bounded in time and size), then
// close, so the client sees the answer rather than a reset.
void serve_connection::linger_close() {
  beast::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  stream_.expires_after(std::chrono::seconds(2));
  drain_ = std::make_shared<std::array<char, 16384>>();
  drain(0);
}

void serve_connection::drain(size_t total) {
  stream_.async_read_some(
    net::buffer(*drain_),
    [self = shared_from_this(), total](beast::error_code ec, size_t n) {
      if (ec || total + n > (size_t{8} << 20))
        self->close();
      else
        self->drain(total + n);
    });
}

void serve_connection::close() {
  live_stop();
  release_busy();
  head_deadline_.cancel();
  keepalive_.cancel();
  beast::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
  stream_.close();
}

void start_connection(std::shared_ptr<http_server::impl> srv,
                      tcp::socket sock) {
  beast::error_code ec;
  auto ep = sock.remote_endpoint(ec);
  std::string addr = "-";
  if (!ec) {
    auto a = ep.address();
    if (a.is_v6() && a.to_v6().is_v4_mapped())
      a = net::ip::make_address_v4(net::ip::v4_mapped, a.to_v6());
    addr = a.to_string();
  }
  std::make_shared<serve_connection>(std::move(srv), std::move(sock))
    ->start(std::move(addr));
}

} // namespace mibyan
