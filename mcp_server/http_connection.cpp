// One connection of the MCP Streamable HTTP server (mcp_server/
// http_impl.hpp): reading requests, the checks, POST / GET / DELETE, and the
// event streams. Everything here runs on the connection's strand; deliver()
// and close() are the only entries from other threads, and they post.
#include "mcp_server/http_impl.hpp"

#include <algorithm>
#include <cstring>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>

#include "base/crypto.hpp"
#include "base/log.hpp"

namespace mibyan {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

namespace {

// Transport-level failures carry this JSON-RPC code (as the reference
// servers do).
constexpr int transport_error = -32000;

bool has_token(const std::string& header, const char* token) {
  std::string h = header;
  for (auto& c : h)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return h.find(token) != std::string::npos;
}

std::string header_of(const mcp_http_connection::request& req,
                      const char* name) {
  auto i = req.find(name);
  return i == req.end() ? std::string{} : std::string{i->value()};
}

} // namespace

mcp_http_connection::mcp_http_connection(
  std::shared_ptr<mcp_http_server::impl> srv, tcp::socket sock)
    : srv_(std::move(srv)),
      stream_(std::move(sock)),
      keepalive_(stream_.get_executor()),
      stall_(stream_.get_executor()) {}

mcp_http_connection::~mcp_http_connection() {
  std::lock_guard<std::mutex> g{srv_->mtx};
  srv_->conns.erase(this);
}

void mcp_http_connection::start() {
  net::dispatch(stream_.get_executor(),
                [self = shared_from_this()] { self->read_request(); });
}

void mcp_http_connection::close() {
  net::post(stream_.get_executor(),
            [self = shared_from_this()] { self->gone("closed by the server"); });
}

void mcp_http_connection::deliver(std::string text, uint64_t event_id,
                                  bool final) {
  net::post(stream_.get_executor(),
            [self = shared_from_this(), text = std::move(text), event_id,
             final]() mutable {
              self->on_deliver(std::move(text), event_id, final);
            });
}

// -- reading and checks ---------------------------------------------------------

void mcp_http_connection::read_request() {
  mode_ = mode::reading;
  session_.reset();
  session_id_.clear();
  request_id_ = json::value{};
  parser_.emplace();
  parser_->header_limit(16 * 1024);
  parser_->body_limit(static_cast<uint64_t>(srv_->cfg.max_message_bytes));
  stream_.expires_after(std::chrono::seconds(srv_->cfg.request_timeout_s));
  http::async_read(stream_, buffer_, *parser_,
                   [self = shared_from_this()](beast::error_code ec, size_t) {
                     self->on_read(ec);
                   });
}

void mcp_http_connection::on_read(beast::error_code ec) {
  if (mode_ == mode::closed)
    return;
  if (ec == http::error::body_limit) {
    keep_alive_ = false;
    reply_error(413, transport_error,
                "Payload Too Large: the message is over "
                  + std::to_string(srv_->cfg.max_message_bytes) + " bytes");
    return;
  }
  if (ec == http::error::header_limit) {
    keep_alive_ = false;
    reply_error(431, transport_error, "the request head is too large");
    return;
  }
  if (ec) {
    // Closed, timed out or garbage: nothing to answer on.
    if (ec != http::error::end_of_stream && ec != net::error::eof
        && ec != beast::error::timeout && ec != net::error::operation_aborted
        && ec != net::error::connection_reset) {
      keep_alive_ = false;
      reply_error(400, transport_error, "Bad Request: " + ec.message());
      return;
    }
    finish();
    return;
  }
  stream_.expires_never();
  handle(parser_->release());
}

void mcp_http_connection::handle(request req) {
  version_ = req.version();
  keep_alive_ = req.keep_alive();
  auto target = std::string{req.target()};
  auto path = target.substr(0, target.find('?'));
  if (path != srv_->cfg.path) {
    reply_error(404, transport_error, "Not Found: the MCP endpoint is "
                                        + srv_->cfg.path);
    return;
  }
  auto origin = header_of(req, "Origin");
  if (!origin.empty() && !srv_->origin_allowed(origin)) {
    MIBYAN_LOG(warning, "mcp-serve", "refused a request from Origin "
                                       << origin);
    reply_error(403, transport_error, "Forbidden: Origin " + origin
                                        + " is not allowed");
    return;
  }
  if (!srv_->cfg.key.empty()) {
    auto auth = header_of(req, "Authorization");
    const std::string prefix = "Bearer ";
    bool ok = auth.size() > prefix.size()
              && has_token(auth.substr(0, prefix.size()), "bearer ")
              && proof_equal(auth.substr(prefix.size()), srv_->cfg.key);
    if (!ok) {
      reply_error(401, transport_error,
                  "Unauthorized: a valid bearer key is required",
                  {{"WWW-Authenticate", "Bearer"}});
      return;
    }
  }
  auto version = header_of(req, "MCP-Protocol-Version");
  if (!version.empty()) {
    const auto& vs = mcp_server_protocol_versions();
    if (std::find(vs.begin(), vs.end(), version) == vs.end()) {
      reply_error(400, transport_error,
                  "Bad Request: unsupported MCP-Protocol-Version " + version
                    + " (supported: 2025-11-25, 2025-06-18)");
      return;
    }
  }
  auto sid = header_of(req, "Mcp-Session-Id");
  switch (req.method()) {
    case http::verb::post:
      handle_post(req, sid);
      return;
    case http::verb::get:
      handle_get(req, sid);
      return;
    case http::verb::delete_:
      handle_delete(sid);
      return;
    default:
      reply_error(405, transport_error, "Method Not Allowed",
                  {{"Allow", "GET, POST, DELETE"}});
      return;
  }
}

// -- POST -------------------------------------------------------------------------

void mcp_http_connection::handle_post(request& req, const std::string& sid) {
  auto accept = header_of(req, "Accept");
  accepts_sse_ = accept.empty() || has_token(accept, "text/event-stream")
                 || has_token(accept, "*/*");
  if (!accept.empty() && !accepts_sse_
      && !has_token(accept, "application/json")) {
    reply_error(406, transport_error,
                "Not Acceptable: the client must accept application/json "
                "and text/event-stream");
    return;
  }
  auto type = header_of(req, "Content-Type");
  if (!has_token(type, "application/json")) {
    reply_error(415, transport_error,
                "Unsupported Media Type: the body must be application/json");
    return;
  }
  auto parsed = json::parse(req.body());
  if (!parsed) {
    reply_error(400, mcp_errors::parse_error, "Parse error: " + parsed.error);
    return;
  }
  const json::value& msg = *parsed.v;
  if (msg.is_array()) {
    reply_error(400, mcp_errors::invalid_request,
                "Invalid Request: JSON-RPC batches are not supported");
    return;
  }
  if (!msg.is_object()) {
    reply_error(400, mcp_errors::invalid_request,
                "Invalid Request: not a JSON-RPC message");
    return;
  }
  const auto* method = msg.find("method");
  const auto* id = msg.find("id");
  bool is_request = method != nullptr && id != nullptr;
  auto& core = *srv_->core;
  if (is_request && method->is_string()
      && method->as_string() == "initialize") {
    // A new session; its id goes back in the response's header.
    auto routes = std::make_shared<mcp_session_routes>();
    session_ = core.open_session(srv_->outbound_for(routes));
    if (!session_) {
      reply_error(503, transport_error,
                  "Service Unavailable: too many open sessions (end one "
                  "with DELETE)",
                  {{"Retry-After", "10"}});
      return;
    }
    session_id_ = mcp_server_core::id_of(*session_);
    {
      std::lock_guard<std::mutex> g{srv_->mtx};
      srv_->routes[session_id_] = routes;
    }
    request_id_ = *id;
    mode_ = mode::awaiting;
    probe();
    {
      std::lock_guard<std::mutex> g{routes->mtx};
      routes->exchanges[id->dump()] = weak_from_this();
    }
    core.handle(session_, msg);
    if (!mcp_server_core::initialized(*session_)) {
      // A refused initialize (its error is on its way) opens nothing.
      core.close_session(session_id_, "initialize failed");
      srv_->drop_routes(session_id_);
    }
    return;
  }
  if (sid.empty()) {
    reply_error(400, transport_error,
                "Bad Request: the Mcp-Session-Id header is required (send "
                "initialize first)");
    return;
  }
  session_ = core.find_session(sid);
  auto routes = srv_->routes_of(sid, false);
  if (!session_ || !routes) {
    if (!session_)
      srv_->drop_routes(sid);
    reply_error(404, transport_error,
                "Not Found: no session " + sid
                  + " (it ended or never existed; send initialize)");
    return;
  }
  session_id_ = sid;
  if (!is_request) {
    // Notifications and responses: accepted, nothing to return.
    core.handle(session_, msg);
    reply(202, {}, keep_alive_);
    return;
  }
  if (id->is_string() || id->is_int()) {
    bool duplicate = false;
    {
      std::lock_guard<std::mutex> g{routes->mtx};
      auto key = id->dump();
      auto i = routes->exchanges.find(key);
      duplicate = i != routes->exchanges.end() && i->second.lock();
      if (!duplicate)
        routes->exchanges[key] = weak_from_this();
    }
    if (duplicate) {
      reply_error(400, mcp_errors::invalid_request,
                  "Invalid Request: request id " + id->dump()
                    + " is in use by a request still running");
      return;
    }
    request_id_ = *id;
  }
  mode_ = mode::awaiting;
  probe();
  core.handle(session_, msg);
  if (request_id_.is_null()) {
    // An invalid id: the core's error went to the GET stream or nowhere;
    // answer here.
    mode_ = mode::reading;
    reply_error(400, mcp_errors::invalid_request,
                "Invalid Request: the id must be a string or an integer");
  }
}

// -- GET and DELETE ---------------------------------------------------------------

void mcp_http_connection::handle_get(request& req, const std::string& sid) {
  if (!has_token(header_of(req, "Accept"), "text/event-stream")) {
    reply_error(406, transport_error,
                "Not Acceptable: GET opens an event stream (Accept: "
                "text/event-stream)");
    return;
  }
  if (sid.empty()) {
    reply_error(400, transport_error,
                "Bad Request: the Mcp-Session-Id header is required");
    return;
  }
  session_ = srv_->core->find_session(sid);
  auto routes = srv_->routes_of(sid, false);
  if (!session_ || !routes) {
    reply_error(404, transport_error, "Not Found: no session " + sid);
    return;
  }
  session_id_ = sid;
  is_get_ = true;
  uint64_t after = 0;
  bool resume = false;
  auto last = header_of(req, "Last-Event-ID");
  if (!last.empty()) {
    char* end = nullptr;
    after = std::strtoull(last.c_str(), &end, 10);
    resume = end != nullptr && *end == '\0';
  }
  std::shared_ptr<mcp_http_connection> old;
  std::vector<std::pair<uint64_t, std::string>> replay;
  {
    std::lock_guard<std::mutex> g{routes->mtx};
    old = routes->get_stream.lock();
    routes->get_stream = weak_from_this();
    for (auto& e : routes->events) {
      if (resume ? e.id > after : !e.delivered) {
        replay.emplace_back(e.id, e.text);
        e.delivered = true;
      }
    }
  }
  // One GET stream per session: the newer one replaces the older.
  if (old && old.get() != this)
    old->close();
  start_stream();
  for (auto& [eid, text] : replay)
    on_deliver(std::move(text), eid, false);
}

void mcp_http_connection::handle_delete(const std::string& sid) {
  if (sid.empty()) {
    reply_error(400, transport_error,
                "Bad Request: the Mcp-Session-Id header is required");
    return;
  }
  bool closed = srv_->core->close_session(sid, "ended by the client "
                                               "(HTTP DELETE)");
  srv_->drop_routes(sid);
  if (!closed) {
    reply_error(404, transport_error, "Not Found: no session " + sid);
    return;
  }
  reply(204, {}, keep_alive_);
}

// -- plain responses ----------------------------------------------------------------

void mcp_http_connection::reply(
  unsigned status, std::string body, bool keep_alive,
  const std::vector<std::pair<std::string, std::string>>& extra) {
  auto res = std::make_shared<http::response<http::string_body>>(
    static_cast<http::status>(status), version_);
  res->set(http::field::server, "mibyan-mcp");
  if (!body.empty())
    res->set(http::field::content_type, "application/json");
  if (!session_id_.empty())
    res->set("Mcp-Session-Id", session_id_);
  for (auto& [k, v] : extra)
    res->set(k, v);
  res->body() = std::move(body);
  res->keep_alive(keep_alive);
  res->prepare_payload();
  mode_ = mode::reading;
  stream_.expires_after(std::chrono::seconds(srv_->cfg.request_timeout_s));
  http::async_write(stream_, *res,
                    [self = shared_from_this(), res,
                     keep_alive](beast::error_code ec, size_t) {
                      if (ec || !keep_alive || self->mode_ == mode::closed) {
                        self->finish();
                        return;
                      }
                      self->read_request();
                    });
}

void mcp_http_connection::reply_error(
  unsigned status, int code, const std::string& message,
  const std::vector<std::pair<std::string, std::string>>& extra) {
  reply(status, mcp_error_response(nullptr, code, message),
        keep_alive_ && status < 500, extra);
}

// -- event streams ---------------------------------------------------------------

void mcp_http_connection::on_deliver(std::string text, uint64_t event_id,
                                     bool final) {
  if (mode_ == mode::closed)
    return;
  if (mode_ == mode::awaiting) {
    if (final) {
      // The response came first: a plain JSON answer; the connection then
      // reads the next request (the probe's read stops first).
      request_id_ = json::value{};
      if (probing_) {
        beast::error_code ec;
        stream_.socket().cancel(ec);
      }
      reply(200, std::move(text), keep_alive_);
      return;
    }
    if (!accepts_sse_)
      return; // a JSON-only client sees only the response
    start_stream();
  }
  if (mode_ != mode::streaming)
    return;
  std::string frame;
  if (event_id != 0)
    frame += "id: " + std::to_string(event_id) + "\n";
  frame += "event: message\ndata: ";
  frame += text;
  frame += "\n\n";
  if (final) {
    request_id_ = json::value{};
    end_after_write_ = true;
  }
  queue_event(std::move(frame));
}

void mcp_http_connection::start_stream() {
  mode_ = mode::streaming;
  // The stream is the rest of this connection (Connection: close marks
  // its end), so no chunking is needed.
  std::string head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                     "Cache-Control: no-cache\r\nConnection: close\r\n"
                     "Server: mibyan-mcp\r\n";
  if (!session_id_.empty())
    head += "Mcp-Session-Id: " + session_id_ + "\r\n";
  head += "\r\n";
  stream_.expires_never();
  queue_event(std::move(head));
  probe();
  keepalive();
}

void mcp_http_connection::queue_event(std::string frame) {
  out_.push_back(std::move(frame));
  if (!writing_)
    write_next();
}

void mcp_http_connection::write_next() {
  if (mode_ == mode::closed)
    return;
  if (out_.empty()) {
    writing_ = false;
    if (end_after_write_)
      finish();
    return;
  }
  writing_ = true;
  auto buf = std::make_shared<std::string>(std::move(out_.front()));
  out_.pop_front();
  // A client that stops reading is dropped after a minute.
  stall_.expires_after(std::chrono::seconds(60));
  stall_.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (!ec)
      self->gone("the client stopped reading its event stream");
  });
  net::async_write(stream_.socket(), net::buffer(*buf),
                   [self = shared_from_this(), buf](beast::error_code ec,
                                                    size_t) {
                     self->stall_.cancel();
                     if (ec) {
                       self->gone("writing the event stream failed");
                       return;
                     }
                     self->write_next();
                   });
}

void mcp_http_connection::probe() {
  // While a request waits for its answer the client sends nothing; a read
  // that fails means it closed the connection. Bytes that do arrive (a
  // pipelined request) are kept for the next read.
  if (probing_)
    return;
  probing_ = true;
  stream_.socket().async_read_some(
    net::buffer(probe_buf_),
    [self = shared_from_this()](beast::error_code ec, size_t n) {
      self->probing_ = false;
      if (self->mode_ == mode::closed || ec == net::error::operation_aborted)
        return;
      if (ec) {
        self->gone("the client closed the connection");
        return;
      }
      if (self->mode_ == mode::awaiting) {
        auto b = self->buffer_.prepare(n);
        std::memcpy(b.data(), self->probe_buf_.data(), n);
        self->buffer_.commit(n);
      }
      if (self->mode_ == mode::awaiting || self->mode_ == mode::streaming)
        self->probe();
    });
}

void mcp_http_connection::keepalive() {
  keepalive_.expires_after(std::chrono::seconds(
    std::max<int64_t>(1, srv_->cfg.keepalive_s)));
  keepalive_.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (ec || self->mode_ != mode::streaming)
      return;
    if (!self->writing_ && self->out_.empty())
      self->queue_event(": keep-alive\n\n");
    self->keepalive();
  });
}

void mcp_http_connection::gone(const char* why) {
  if (mode_ == mode::closed)
    return;
  bool waiting = mode_ == mode::awaiting || mode_ == mode::streaming;
  mode_ = mode::closed;
  auto routes = session_id_.empty() ? nullptr
                                    : srv_->routes_of(session_id_, false);
  if (routes) {
    std::lock_guard<std::mutex> g{routes->mtx};
    if (!request_id_.is_null()) {
      auto i = routes->exchanges.find(request_id_.dump());
      if (i != routes->exchanges.end() && i->second.lock().get() == this)
        routes->exchanges.erase(i);
    }
    if (is_get_ && routes->get_stream.lock().get() == this)
      routes->get_stream.reset();
  }
  if (waiting && !request_id_.is_null() && session_) {
    MIBYAN_LOG(info, "mcp-serve", "session " << session_id_ << ": request "
                                             << request_id_.dump() << ": "
                                             << why);
    srv_->core->abandon_request(session_, request_id_,
                                std::string{"the client left: "} + why);
  }
  request_id_ = json::value{};
  finish();
}

void mcp_http_connection::finish() {
  mode_ = mode::closed;
  keepalive_.cancel();
  stall_.cancel();
  beast::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
  stream_.socket().close(ec);
}

} // namespace mibyan
