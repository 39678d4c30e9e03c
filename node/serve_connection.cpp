// One HTTP connection of `mibyan serve` (docs/serve.md), on its own strand:
// everything a connection owns is touched only there. Turn callbacks
// arrive on CAF threads and only post to the strand.
#include "node/serve_impl.hpp"

#include <array>
#include <deque>
#include <optional>

#include <sys/socket.h>

#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "base/json.hpp"
#include "base/log.hpp"
#include "node/openai_chat.hpp"
#include "node/serve_routes.hpp"
#include "storage/session_store.hpp"

namespace mibyan {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

using server_impl = http_server::impl;
using string_response = http::response<http::string_body>;

class connection : public std::enable_shared_from_this<connection> {
public:
  connection(std::shared_ptr<server_impl> srv, tcp::socket sock)
    : srv_(std::move(srv)), stream_(std::move(sock)) {}

  ~connection() {
    release_busy();
    --srv_->connections;
  }

  void start() {
    net::dispatch(stream_.get_executor(),
                  [self = shared_from_this()] { self->read_request(); });
  }

private:
  // -- reading ----------------------------------------------------------------

  void read_request() {
    if (srv_->stopping) {
      close();
      return;
    }
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(srv_->cfg.limits
                                                  .max_header_bytes));
    parser_->body_limit(static_cast<uint64_t>(srv_->cfg.limits
                                                .max_body_bytes));
    // An idle keep-alive connection and a slow head share this deadline.
    stream_.expires_after(std::chrono::seconds(
      first_ ? srv_->cfg.limits.header_timeout
             : srv_->cfg.limits.idle_timeout));
    first_ = false;
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](beast::error_code ec,
                                                        size_t) {
                              self->on_header(ec);
                            });
  }

  void on_header(beast::error_code ec) {
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

  void read_body() {
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec,
                                                 size_t) {
                       self->on_body(ec);
                     });
  }

  // A request could not be read: answer when the socket still works, then
  // close (the stream position is unknown).
  void read_failed(beast::error_code ec) {
    if (ec == http::error::end_of_stream || ec == net::error::eof
        || ec == beast::error::timeout || ec == net::error::operation_aborted
        || ec == net::error::connection_reset) {
      // A request started but not finished in time (slow head or body):
      // one access line with 408; an idle keep-alive connection closes
      // silently.
      if (ec == beast::error::timeout
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

  void on_body(beast::error_code ec) {
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

  // -- routing ----------------------------------------------------------------

  void handle() {
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
    if (path == "/v1/sessions" || path.rfind("/v1/sessions/", 0) == 0) {
      sessions(path, query);
      return;
    }
    send_error(http::status::not_found, "no such endpoint: " + path,
               "invalid_request_error", "not_found");
  }

  bool authorized() {
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

  void method_not_allowed() {
    send_error(http::status::method_not_allowed,
               "method " + method_ + " is not allowed on this endpoint",
               "invalid_request_error", "method_not_allowed");
  }

  // -- sessions ---------------------------------------------------------------

  void sessions(const std::string& path,
                const std::map<std::string, std::string>& query) {
    auto store = session_store_of(srv_->rt);
    if (!store) {
      send_error(http::status::service_unavailable,
                 "the session store is unavailable", "server_error",
                 "store_unavailable");
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

  // -- chat -------------------------------------------------------------------

  void chat() {
    auto ct = std::string{req_[http::field::content_type]};
    auto semi = ct.find(';');
    auto base = ct.substr(0, semi);
    while (!base.empty() && base.back() == ' ')
      base.pop_back();
    if (!beast::iequals(base, "application/json")) {
      send_error(http::status::unsupported_media_type,
                 "Content-Type must be application/json (got '" + ct + "')",
                 "invalid_request_error", "unsupported_media_type");
      return;
    }
    chat_completion_request cr;
    if (auto err = parse_chat_completion(req_.body(), cr); !err.empty()) {
      send_error(http::status::bad_request, err, "invalid_request_error",
                 "invalid_request");
      return;
    }
    if (!cr.model.empty() && cr.model != srv_->cfg.model_id
        && cr.model != "mibyan") {
      send_error(http::status::not_found,
                 "the model '" + cr.model + "' does not exist on this node "
                 "(it serves '" + srv_->cfg.model_id + "')",
                 "invalid_request_error", "model_not_found");
      return;
    }
    auto header = std::string{req_["X-Mibyan-Session"]};
    if (!header.empty() && !serve::valid_session_id(header)) {
      send_error(http::status::bad_request,
                 "X-Mibyan-Session must be 1 to 128 characters of "
                 "A-Z a-z 0-9 _ . : -",
                 "invalid_request_error", "bad_session_id");
      return;
    }
    if (srv_->stopping) {
      send_error(http::status::service_unavailable,
                 "the server is shutting down", "server_error",
                 "shutting_down");
      return;
    }
    auto max = srv_->cfg.limits.max_concurrent_turns;
    if (srv_->turns.fetch_add(1) >= max) {
      --srv_->turns;
      extra_headers_.emplace_back("Retry-After", "1");
      send_error(http::status::too_many_requests,
                 "too many turns are running (server.max_concurrent_turns = "
                   + std::to_string(max) + "); retry later",
                 "rate_limit_error", "rate_limit_exceeded");
      return;
    }
    stateful_ = !header.empty();
    session_ = stateful_ ? header : srv_->cfg.new_session_id();
    stream_mode_ = cr.stream;
    include_usage_ = cr.include_usage;
    id_ = serve::completion_id();
    created_ = serve::now_seconds();
    model_ = srv_->cfg.model_id;
    {
      std::lock_guard<std::mutex> g{srv_->mtx};
      srv_->running.insert(session_);
    }
    hold_busy();
    turn_call call = srv_->cfg.turn;
    call.session_id = session_;
    call.prompt = std::move(cr.prompt);
    call.history_json = std::move(cr.history_json);
    call.source = "api";
    call.stream = true;
    auto weak = std::weak_ptr<connection>(shared_from_this());
    auto ex = stream_.get_executor();
    if (stream_mode_) {
      call.on_delta = [weak, ex](const std::string& kind,
                                 const std::string& text) {
        if (auto self = weak.lock())
          self->srv_->post_if_open(ex, [self, kind, text] {
            self->on_delta(kind, text);
          });
      };
      call.on_tool = call.on_delta; // tool events share the stream

      start_stream();
    }
    // Keeps the connection alive until the turn ends.
    auto self = shared_from_this();
    watch_disconnect();
    srv_->rt.run_turn_async(call, [self, ex](turn_outcome out) {
      self->srv_->post_if_open(ex, [self, out = std::move(out)]() mutable {
        self->on_turn_done(std::move(out));
      });
    });
  }

  // While a turn runs, a readable socket that reads EOF means the client
  // left: interrupt the turn (what was done is persisted).
  void watch_disconnect() {
    stream_.socket().async_wait(
      tcp::socket::wait_read,
      [self = shared_from_this()](beast::error_code ec) {
        if (ec || !self->in_turn_)
          return;
        char c;
        auto n = ::recv(self->stream_.socket().native_handle(), &c, 1,
                        MSG_PEEK | MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
          self->client_gone();
        // n > 0: a pipelined request waits for this turn's answer.
      });
    in_turn_ = true;
  }

  void client_gone() {
    if (gone_)
      return;
    gone_ = true;
    if (in_turn_)
      srv_->rt.interrupt(session_, "the HTTP client disconnected");
  }

  void on_turn_done(turn_outcome out) {
    in_turn_ = false;
    --srv_->turns;
    {
      std::lock_guard<std::mutex> g{srv_->mtx};
      auto i = srv_->running.find(session_);
      if (i != srv_->running.end())
        srv_->running.erase(i);
      if (stateful_)
        srv_->kept[session_] = std::chrono::steady_clock::now();
    }
    if (!stateful_ && !out.session_id.empty())
      srv_->rt.close_session(out.session_id); // its conversation and kernels
    finish_turn(std::move(out));
  }

  // Maps a turn outcome to the response.
  void finish_turn(turn_outcome out) {
    auto s = serve::summarize_turn(out, session_);
    if (gone_) {
      status_ = 499; // logged as "client closed the request"
      log_access();
      close();
      return;
    }
    if (stateful_)
      extra_headers_.emplace_back("X-Mibyan-Session", session_);
    if (stream_mode_) {
      if (s.ok && round_text_.empty() && !s.answer.empty()) {
        json::value d;
        d["content"] = s.answer;
        push(chunk_event(id_, created_, model_, d, "", json::value{}));
      }
      if (s.ok) {
        json::value e2 = s.ext;
        e2["type"] = "turn_end";
        push(chunk_event(id_, created_, model_, json::value{}, "stop", e2));
        if (include_usage_)
          push(chunk_event(id_, created_, model_, json::value{}, "",
                           json::value{}, &s.usage));
      } else {
        push("data: " + error_body(s.message, "server_error",
                                   s.interrupted ? "turn_interrupted"
                                               : "turn_failed")
             + "\n\n");
      }
      push("data: [DONE]\n\n");
      push_last();
      return;
    }
    if (s.not_started) {
      // The turn could not start (configuration, store): the node's fault.
      send_error(http::status::internal_server_error, s.message,
                 "server_error",
                 "turn_not_started");
      return;
    }
    if (!s.ok) {
      send_error(s.interrupted ? http::status::service_unavailable
                               : http::status::bad_gateway,
                 s.message, "server_error",
                 s.interrupted ? "turn_interrupted" : "turn_failed");
      return;
    }
    send_json(http::status::ok,
              completion_body(id_, created_, model_, s.answer, "stop",
                              s.usage, s.ext));
  }

  // -- streaming --------------------------------------------------------------

  void start_stream() {
    sse_res_ = std::make_shared<http::response<http::empty_body>>(
      http::status::ok, req_.version());
    auto& r = *sse_res_;
    r.set(http::field::server, "mibyan");
    r.set(http::field::content_type, "text/event-stream");
    r.set(http::field::cache_control, "no-cache");
    if (stateful_)
      r.set("X-Mibyan-Session", session_);
    r.keep_alive(keep_alive_);
    r.chunked(true);
    status_ = 200;
    sse_sr_ = std::make_shared<http::response_serializer<http::empty_body>>(r);
    writing_ = true;
    http::async_write_header(
      stream_, *sse_sr_,
      [self = shared_from_this()](beast::error_code ec, size_t) {
        self->writing_ = false;
        if (ec) {
          self->client_gone();
          return;
        }
        self->pump();
      });
    json::value d;
    d["role"] = "assistant";
    d["content"] = "";
    push(chunk_event(id_, created_, model_, d, "", json::value{}));
  }

  void on_delta(const std::string& kind, const std::string& text) {
    if (gone_)
      return;
    json::value ext;
    if (kind == "text") {
      round_text_ += text;
      json::value d;
      d["content"] = text;
      push(chunk_event(id_, created_, model_, d, "", json::value{}));
      return;
    }
    if (kind == "tool_start" || kind == "tool_end") {
      round_text_.clear();
      ext["type"] = kind;
      auto parsed = json::parse(text);
      ext["tool"] = parsed ? *parsed.v : json::value{text};
    } else if (kind == "reasoning") {
      ext["type"] = "reasoning";
      ext["text"] = text;
    } else if (kind == "restart") {
      round_text_.clear();
      ext["type"] = "restart";
    } else {
      return;
    }
    push(chunk_event(id_, created_, model_, json::value{}, "", ext));
  }

  void push(std::string event) {
    out_.push_back(std::make_shared<std::string>(std::move(event)));
    pump();
  }

  void push_last() {
    out_.push_back(nullptr);
    pump();
  }

  void pump() {
    if (writing_ || out_.empty() || gone_)
      return;
    auto item = out_.front();
    out_.pop_front();
    writing_ = true;
    auto done = [self = shared_from_this(), item](beast::error_code ec,
                                                  size_t) {
      self->writing_ = false;
      if (ec) {
        self->client_gone();
        if (!self->in_turn_)
          self->close();
        return;
      }
      if (!item) {
        self->log_access();
        if (self->keep_alive_)
          self->read_request();
        else
          self->close();
        return;
      }
      self->pump();
    };
    if (item)
      net::async_write(stream_, http::make_chunk(net::buffer(*item)), done);
    else
      net::async_write(stream_, http::make_chunk_last(), done);
  }

  // -- plain responses --------------------------------------------------------

  void send_error(http::status st, const std::string& message,
                  const std::string& type, const std::string& code) {
    send_json(st, error_body(message, type, code));
  }

  void send_json(http::status st, std::string body) {
    auto res = std::make_shared<string_response>(st, req_.version() == 0
                                                       ? 11
                                                       : req_.version());
    res->set(http::field::server, "mibyan");
    res->set(http::field::content_type, "application/json");
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
  void hold_busy() {
    if (!holds_busy_) {
      holds_busy_ = true;
      srv_->begin_busy();
    }
  }
  void release_busy() {
    if (holds_busy_) {
      holds_busy_ = false;
      srv_->end_busy();
    }
  }

  void log_access() {
    release_busy();
    auto ms = std::chrono::duration<double, std::milli>(
                std::chrono::steady_clock::now() - start_)
                .count();
    char dur[32];
    std::snprintf(dur, sizeof dur, "%.1fms", ms);
    MIBYAN_LOG(info, "serve",
               method_ << " " << path_ << " " << status_ << " " << dur
                       << " session=" << (session_.empty() ? "-" : session_));
    session_.clear();
    stateful_ = false;
    stream_mode_ = false;
    round_text_.clear();
    start_ = {};
  }

  // After answering a request we did not read in full: stop sending, read
  // and drop what the client still sends (bounded in time and size), then
  // close, so the client sees the answer rather than a reset.
  void linger_close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.expires_after(std::chrono::seconds(2));
    drain_ = std::make_shared<std::array<char, 16384>>();
    drain(0);
  }
  void drain(size_t total) {
    stream_.async_read_some(
      net::buffer(*drain_),
      [self = shared_from_this(), total](beast::error_code ec, size_t n) {
        if (ec || total + n > (size_t{8} << 20))
          self->close();
        else
          self->drain(total + n);
      });
  }

  void close() {
    release_busy();
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.close();
  }

  std::shared_ptr<server_impl> srv_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::request<http::string_body> req_;
  std::vector<std::pair<std::string, std::string>> extra_headers_;
  std::chrono::steady_clock::time_point start_;
  std::string method_, path_, session_;
  int status_ = 0;
  bool first_ = true;
  bool keep_alive_ = true;
  // The running turn.
  bool in_turn_ = false;
  bool gone_ = false;
  bool stateful_ = false;
  bool stream_mode_ = false;
  bool include_usage_ = false;
  std::string id_, model_, round_text_;
  int64_t created_ = 0;
  // Streaming output.
  std::shared_ptr<http::response<http::empty_body>> sse_res_;
  std::shared_ptr<http::response_serializer<http::empty_body>> sse_sr_;
  std::deque<std::shared_ptr<std::string>> out_;
  bool writing_ = false;
  bool holds_busy_ = false;
  bool lingering_ = false;
  std::shared_ptr<std::array<char, 16384>> drain_;
};

} // namespace

void start_connection(std::shared_ptr<http_server::impl> srv,
                      tcp::socket sock) {
  std::make_shared<connection>(std::move(srv), std::move(sock))->start();
}

} // namespace mibyan
