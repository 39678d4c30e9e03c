// The Beast/Asio side of `mibyan serve` (docs/serve.md). One `connection`
// per accepted socket, on its own strand; everything a connection owns is
// touched only on that strand. Turn callbacks arrive on CAF threads and
// only post to the strand.
#include "node/http_server.hpp"

#include <array>
#include <atomic>
#include <condition_variable>
#include <ctime>
#include <deque>
#include <future>
#include <set>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include <sys/socket.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "base/json.hpp"
#include "base/log.hpp"
#include "node/openai_chat.hpp"
#include "storage/session_json.hpp"
#include "storage/session_store.hpp"

namespace mibyan {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

bool constant_time_equal(const std::string& a, const std::string& b) {
  // Every byte of the longer string is visited; the result accumulates.
  size_t n = std::max(a.size(), b.size());
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

namespace {

int64_t now_seconds() {
  return static_cast<int64_t>(std::time(nullptr));
}

std::string completion_id() {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = std::random_device{}();
  char buf[48];
  std::snprintf(buf, sizeof buf, "chatcmpl-%012llx%06llx",
                static_cast<unsigned long long>(salt & 0xffffffffffffull),
                static_cast<unsigned long long>(++counter & 0xffffffull));
  return buf;
}

// A session id from a client header: 1..128 of [A-Za-z0-9_.:-].
bool valid_session_id(const std::string& s) {
  if (s.empty() || s.size() > 128)
    return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'
          || c == ':' || c == '-'))
      return false;
  return true;
}

std::string url_decode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size()
               && std::isxdigit(static_cast<unsigned char>(s[i + 1]))
               && std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(std::stoi(std::string{s.substr(i + 1, 2)},
                                         nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// Splits a target into its path and decoded query parameters.
void split_target(std::string_view target, std::string& path,
                  std::map<std::string, std::string>& query) {
  auto q = target.find('?');
  path = std::string{target.substr(0, q)};
  if (q == std::string_view::npos)
    return;
  auto rest = target.substr(q + 1);
  while (!rest.empty()) {
    auto amp = rest.find('&');
    auto item = rest.substr(0, amp);
    auto eq = item.find('=');
    if (eq == std::string_view::npos)
      query[url_decode(item)] = "";
    else
      query[url_decode(item.substr(0, eq))] = url_decode(item.substr(eq + 1));
    if (amp == std::string_view::npos)
      break;
    rest = rest.substr(amp + 1);
  }
}

bool parse_limit(const std::map<std::string, std::string>& q, size_t& out) {
  auto i = q.find("limit");
  if (i == q.end())
    return true;
  char* end = nullptr;
  auto n = std::strtoul(i->second.c_str(), &end, 10);
  if (i->second.empty() || *end != '\0' || n == 0 || n > 1000)
    return false;
  out = n;
  return true;
}

} // namespace

struct http_server::impl : std::enable_shared_from_this<http_server::impl> {
  runtime& rt;
  http_server_settings cfg;
  net::io_context ioc;
  tcp::acceptor acceptor{ioc};
  std::vector<std::thread> threads;
  // Store reads and deletes run here, never on an I/O thread.
  net::thread_pool store_pool{1};
  std::atomic<int64_t> connections{0};
  std::atomic<int64_t> turns{0};
  std::atomic<bool> stopping{false};
  bool stopped = false; // guarded by mtx
  // Running turns by session (for shutdown interrupts); responses still
  // being produced (turns and store calls), for the graceful wait.
  std::mutex mtx;
  std::condition_variable cv;
  std::multiset<std::string> running;
  int64_t busy = 0;
  // Kept sessions (X-Mibyan-Session) by the end of their last turn; their
  // conversations are closed after server.session_idle_timeout.
  std::map<std::string, std::chrono::steady_clock::time_point> kept;
  net::steady_timer reaper{ioc};

  impl(runtime& r, http_server_settings s) : rt(r), cfg(std::move(s)) {}

  void begin_busy() {
    std::lock_guard<std::mutex> g{mtx};
    ++busy;
  }
  void end_busy() {
    std::lock_guard<std::mutex> g{mtx};
    --busy;
    cv.notify_all();
  }

  void accept();

  // Every tick: closes the conversations (and kernels) of kept sessions
  // idle longer than server.session_idle_timeout; the store keeps them,
  // the next turn reloads the history.
  void reap() {
    auto period = std::chrono::seconds(
      std::min<int64_t>(60, std::max<int64_t>(1, cfg.limits
                                                   .session_idle_timeout)));
    reaper.expires_after(period);
    reaper.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (ec || self->stopping)
        return;
      auto limit = std::chrono::seconds(self->cfg.limits.session_idle_timeout);
      auto now = std::chrono::steady_clock::now();
      std::vector<std::string> idle;
      {
        std::lock_guard<std::mutex> g{self->mtx};
        for (auto i = self->kept.begin(); i != self->kept.end();) {
          if (now - i->second > limit && self->running.count(i->first) == 0) {
            idle.push_back(i->first);
            i = self->kept.erase(i);
          } else {
            ++i;
          }
        }
      }
      for (auto& id : idle) {
        MIBYAN_LOG(info, "serve", "closed idle session " << id);
        self->rt.close_session(id);
      }
      self->reap();
    });
  }
};

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
      if (ec == beast::error::timeout)
        MIBYAN_LOG(info, "serve", "closed a connection: the client was too "
                                  "slow to send its request");
      close();
      return;
    }
    if (start_ == std::chrono::steady_clock::time_point{})
      start_ = std::chrono::steady_clock::now();
    method_ = parser_ && parser_->is_header_done()
                ? std::string{parser_->get().method_string()}
                : "-";
    path_ = parser_ && parser_->is_header_done()
              ? std::string{parser_->get().target()}
              : "-";
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
    split_target(std::string_view{target.data(), target.size()}, path,
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
    auto store = srv_->rt.sessions();
    if (!store) {
      send_error(http::status::service_unavailable,
                 "the session store is unavailable", "server_error",
                 "store_unavailable");
      return;
    }
    size_t limit = 20;
    if (!parse_limit(query, limit)) {
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
    net::post(srv->store_pool, [self = shared_from_this(), srv, store, id,
                                search, q, role, only, limit, del] {
      http::status st = http::status::ok;
      std::string body;
      std::string code;
      if (search) {
        search_request sr;
        sr.query = q;
        sr.limit = limit;
        sr.session_id = only;
        if (!role.empty())
          sr.roles.push_back(role);
        auto found = store->search(sr);
        if (found)
          body = search_results_json(*found).dump();
        else
          st = http::status::bad_request, body = found.error,
          code = "bad_search";
      } else if (id.empty()) {
        auto list = store->list_sessions(limit, 0);
        if (list) {
          json::value out = json::value::make_array();
          for (auto& s : *list)
            out.push_back(session_json(s));
          json::value v;
          v["object"] = "list";
          v["data"] = std::move(out);
          body = v.dump();
        } else {
          st = http::status::internal_server_error, body = list.error,
          code = "store_error";
        }
      } else if (!store->get_session(id)) {
        st = http::status::not_found;
        body = "no session '" + id + "'";
        code = "session_not_found";
      } else if (del) {
        bool busy;
        {
          std::lock_guard<std::mutex> g{srv->mtx};
          busy = srv->running.count(id) > 0;
        }
        if (busy) {
          st = http::status::conflict;
          body = "session '" + id + "' has a turn running; retry later";
          code = "session_busy";
        } else if (auto r = store->delete_session(id); !r) {
          st = http::status::internal_server_error, body = r.error,
          code = "store_error";
        } else {
          srv->rt.close_session(id);
          {
            std::lock_guard<std::mutex> g{srv->mtx};
            srv->kept.erase(id);
          }
          json::value v;
          v["id"] = id;
          v["object"] = "session.deleted";
          v["deleted"] = true;
          body = v.dump();
        }
      } else {
        auto info = store->get_session(id);
        auto msgs = store->load_messages(id);
        if (info && msgs) {
          auto out = session_json(*info);
          json::value list = json::value::make_array();
          for (auto& m : *msgs)
            list.push_back(message_json(m));
          out["messages"] = std::move(list);
          body = out.dump();
        } else {
          st = http::status::internal_server_error;
          body = info ? msgs.error : info.error;
          code = "store_error";
        }
      }
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
    if (!header.empty() && !valid_session_id(header)) {
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
    id_ = completion_id();
    created_ = now_seconds();
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
          net::post(ex, [self, kind, text] { self->on_delta(kind, text); });
      };
      start_stream();
    }
    // Keeps the connection alive until the turn ends.
    auto self = shared_from_this();
    watch_disconnect();
    srv_->rt.run_turn_async(call, [self, ex](turn_outcome out) {
      net::post(ex, [self, out = std::move(out)]() mutable {
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
    std::string answer, err, exit_reason;
    bool failed = false, interrupted = false, has_answer = false;
    completion_usage usage;
    json::value ext;
    if (!out.error.empty()) {
      failed = true;
      err = out.error;
    } else if (auto parsed = json::parse(out.result_json);
               parsed && parsed.v->is_object()) {
      auto& r = *parsed.v;
      if (auto fr = r.find("final_response"); fr && fr->is_string()) {
        answer = fr->as_string();
        has_answer = true;
      }
      failed = r.get_bool("failed", false);
      interrupted = r.get_bool("interrupted", false);
      err = r.get_string("error", "");
      exit_reason = r.get_string("turn_exit_reason", "");
      usage.prompt_tokens = r.get_int("prompt_tokens", 0);
      usage.completion_tokens = r.get_int("completion_tokens", 0);
      usage.total_tokens = r.get_int("total_tokens", 0);
      ext["session_id"] = session_;
      ext["api_calls"] = r.get_int("api_calls", 0);
      ext["turn_exit_reason"] = exit_reason;
      ext["completed"] = r.get_bool("completed", false);
    } else {
      failed = true;
      err = "malformed turn result";
    }
    if (gone_) {
      status_ = 499; // logged as "client closed the request"
      log_access();
      close();
      return;
    }
    if (stateful_)
      extra_headers_.emplace_back("X-Mibyan-Session", session_);
    bool ok = has_answer && !failed;
    std::string message = !err.empty() ? err
                          : interrupted ? "the turn was interrupted"
                                        : "the turn produced no answer";
    if (stream_mode_) {
      if (ok && round_text_.empty() && !answer.empty()) {
        json::value d;
        d["content"] = answer;
        push(chunk_event(id_, created_, model_, d, "", json::value{}));
      }
      if (ok) {
        json::value e2 = ext;
        e2["type"] = "turn_end";
        push(chunk_event(id_, created_, model_, json::value{}, "stop", e2));
        if (include_usage_)
          push(chunk_event(id_, created_, model_, json::value{}, "",
                           json::value{}, &usage));
      } else {
        push("data: " + error_body(message, "server_error",
                                   interrupted ? "turn_interrupted"
                                               : "turn_failed")
             + "\n\n");
      }
      push("data: [DONE]\n\n");
      push_last();
      return;
    }
    if (!out.error.empty()) {
      // The turn could not start (configuration, store): the node's fault.
      send_error(http::status::internal_server_error, message, "server_error",
                 "turn_not_started");
      return;
    }
    if (!ok) {
      send_error(interrupted ? http::status::service_unavailable
                             : http::status::bad_gateway,
                 message, "server_error",
                 interrupted ? "turn_interrupted" : "turn_failed");
      return;
    }
    send_json(http::status::ok, completion_body(id_, created_, model_, answer,
                                                "stop", usage, ext));
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

void http_server::impl::accept() {
  acceptor.async_accept(
    net::make_strand(ioc),
    [self = shared_from_this()](beast::error_code ec, tcp::socket sock) {
      if (ec) {
        if (ec == net::error::operation_aborted || !self->acceptor.is_open())
          return;
        MIBYAN_LOG(warning, "serve", "accept failed: " << ec.message());
      } else if (self->connections.load()
                 >= self->cfg.limits.max_connections) {
        beast::error_code ignored;
        sock.close(ignored);
      } else {
        ++self->connections;
        std::make_shared<connection>(self, std::move(sock))->start();
      }
      if (!self->stopping)
        self->accept();
    });
}

std::unique_ptr<http_server> http_server::start(runtime& rt,
                                                http_server_settings settings,
                                                std::string* error) {
  auto p = std::make_shared<impl>(rt, std::move(settings));
  beast::error_code ec;
  auto addr = net::ip::make_address(p->cfg.host, ec);
  if (ec) {
    if (error)
      *error = "invalid listen address '" + p->cfg.host + "': "
               + ec.message();
    return nullptr;
  }
  tcp::endpoint ep{addr, p->cfg.port};
  p->acceptor.open(ep.protocol(), ec);
  if (!ec)
    p->acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec)
    p->acceptor.bind(ep, ec);
  if (!ec)
    p->acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    if (error)
      *error = "cannot listen on " + p->cfg.host + ":"
               + std::to_string(p->cfg.port) + ": " + ec.message();
    return nullptr;
  }
  p->accept();
  p->reap();
  auto n = std::max<int64_t>(1, p->cfg.limits.io_threads);
  for (int64_t i = 0; i < n; ++i)
    p->threads.emplace_back([p] {
      for (;;) {
        try {
          p->ioc.run();
          return;
        } catch (const std::exception& e) {
          // A handler threw (a Beast/Asio edge case): log and keep serving.
          MIBYAN_LOG(error, "serve", "I/O handler failed: " << e.what());
        }
      }
    });
  return std::unique_ptr<http_server>(new http_server(std::move(p)));
}

http_server::http_server(std::shared_ptr<impl> p) : impl_(std::move(p)) {}

std::string http_server::host() const {
  beast::error_code ec;
  auto ep = impl_->acceptor.local_endpoint(ec);
  return ec ? impl_->cfg.host : ep.address().to_string();
}

uint16_t http_server::port() const {
  beast::error_code ec;
  auto ep = impl_->acceptor.local_endpoint(ec);
  return ec ? 0 : ep.port();
}

void http_server::shutdown(std::chrono::milliseconds grace) {
  auto& p = *impl_;
  {
    std::lock_guard<std::mutex> g{p.mtx};
    if (p.stopped)
      return;
    p.stopped = true;
  }
  p.stopping = true;
  auto closed = std::make_shared<std::promise<void>>();
  net::post(p.ioc, [&p, closed] {
    beast::error_code ec;
    p.acceptor.close(ec);
    p.reaper.cancel();
    closed->set_value();
  });
  closed->get_future().wait_for(std::chrono::seconds(5));
  std::vector<std::string> ids;
  {
    std::lock_guard<std::mutex> g{p.mtx};
    ids.assign(p.running.begin(), p.running.end());
  }
  for (auto& id : ids)
    p.rt.interrupt(id, "the server is shutting down");
  {
    std::unique_lock<std::mutex> g{p.mtx};
    p.cv.wait_for(g, grace, [&p] { return p.busy == 0; });
  }
  p.ioc.stop();
  for (auto& t : p.threads)
    if (t.joinable())
      t.join();
  p.store_pool.join();
}

http_server::~http_server() {
  shutdown(std::chrono::milliseconds(2000));
}

} // namespace mibyan
