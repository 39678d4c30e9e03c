#include "tools/mcp/mcp_http.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "base/http_client.hpp"
#include "base/json.hpp"
#include "base/log.hpp"
#include "base/strings.hpp"

namespace mibyan {

bool mcp_sse_stream::feed(std::string_view chunk) {
  events_.clear();
  bool ok = parser_.feed(chunk, events_);
  for (auto& e : events_)
    if (!fn_(e))
      return false;
  return ok;
}

namespace {

using clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

bool blank(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
  });
}

// A JSON-RPC error reply for the request `message` (nothing for a
// notification or a reply).
std::string error_reply_for(const std::string& message, const std::string& why) {
  auto parsed = json::parse_members(message, {"id", "method"});
  if (!parsed)
    return {};
  auto id = parsed.v->find("id");
  if (id == nullptr || parsed.v->find("method") == nullptr)
    return {};
  json::value err;
  err["code"] = -32000;
  err["message"] = why;
  json::value reply;
  reply["jsonrpc"] = "2.0";
  reply["id"] = *id;
  reply["error"] = std::move(err);
  return reply.dump();
}

// scheme://authority of `url`.
std::string origin_of(const std::string& url) {
  auto scheme = url.find("://");
  if (scheme == std::string::npos)
    return url;
  auto slash = url.find('/', scheme + 3);
  return slash == std::string::npos ? url : url.substr(0, slash);
}

// One message sent by POST, or the GET stream: what its SSE stream
// delivered so far, for resumption. Shared by the callbacks of every
// transfer that carries it (the POST, then resuming GETs).
struct exchange {
  std::string message;       // the POSTed text ("" for the GET stream)
  std::string request_id;    // dump() of the request's id ("" if none)
  std::string method;        // the message's method ("" for replies)
  bool listen = false;       // the GET stream for server messages
  bool replied = false;      // the reply to `request_id` was delivered
  bool failed = false;       // an error reply was delivered instead
  std::string last_id;       // the last SSE event id seen
  int64_t retry_ms = -1;     // the server's last `retry`
  int failures = 0;          // failed (re)connections in a row
  bool auth_retried = false; // on_unauthorized said "try again" once
  bool unreachable = false;  // the last attempt got no HTTP response
  bool undelivered = false;  // counted in undelivered_ until its POST ends
};

// The response of one transfer.
struct response {
  long status = 0;
  bool sse = false;
  bool had_session = false; // the request carried Mcp-Session-Id
  bool events = false;      // the stream delivered at least one event
  std::string body;
  std::string www_authenticate;
  std::unique_ptr<mcp_sse_stream> parser;
  std::string stop; // why the receiver stopped the transfer
};

class http_transport : public mcp_transport {
public:
  http_transport(mcp_http_settings s, http_client& http)
    : s_(std::move(s)), http_(http) {
    for (auto& [k, v] : s_.headers)
      if (strings::iequals(k, "mcp-protocol-version"))
        user_version_ = true;
  }

  ~http_transport() override { close(); }

  status start(handlers h, milliseconds timeout) override {
    h_ = std::move(h);
    if (!s_.sse)
      return {};
    return start_legacy(timeout);
  }

  status send(const std::string& message) override {
    if (closing_)
      return status::failure(status_code::unavailable, "the server is closed");
    auto x = std::make_shared<exchange>();
    x->message = message;
    if (auto parsed = json::parse_members(message, {"id", "method"})) {
      auto id = parsed.v->find("id");
      auto method = parsed.v->find("method");
      if (method != nullptr && method->is_string())
        x->method = method->as_string();
      if (id != nullptr && method != nullptr)
        x->request_id = id->dump();
    }
    if (x->request_id.empty()) {
      x->undelivered = true;
      undelivered_.fetch_add(1);
    }
    submit_post(x);
    return {};
  }

  int undelivered() const override { return undelivered_.load(); }

  void set_protocol_version(const std::string& v) override {
    std::lock_guard<std::mutex> guard{mtx_};
    version_ = v;
  }

  void close() override {
    if (closing_.exchange(true))
      return;
    stop_worker();
    std::set<http_request_id> ids;
    std::string sid;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      ids.swap(inflight_);
      sid = session_id_;
    }
    for (auto id : ids)
      http_.cancel(id);
    if (stream_id_ != 0)
      http_.cancel(stream_id_);
    if (!s_.sse && !sid.empty()) {
      // End the session (the server may answer 405: it keeps sessions
      // until they expire). Bounded, best effort.
      auto req = base_request("DELETE", s_.url);
      req.total_timeout = milliseconds{2000};
      req.connect_timeout = milliseconds{1000};
      auto res = http_.fetch(std::move(req));
      MIBYAN_LOG(debug, "mcp", s_.server << ": DELETE of the session: HTTP "
                                         << res.summary.status);
    }
    // Every callback captures `this`: wait until each has returned
    // (callback_guard), at most 5 s.
    for (int i = 0; i < 1000 && pending_callbacks_.load() > 0; ++i)
      std::this_thread::sleep_for(milliseconds{5});
  }

private:
  // Counts a transfer's callbacks as running until on_done returns: the
  // last thing each one does is this decrement, so once pending_callbacks_
  // is 0 no callback touches `this` any more (close() waits for that).
  struct callback_guard {
    std::atomic<int>& n;
    ~callback_guard() { n.fetch_sub(1); }
  };

  // -- requests ------------------------------------------------------------

  // A request with the configured headers, the bearer token, the session
  // id and (from 2025-06-18 on) the negotiated protocol version.
  http_request base_request(const std::string& method, const std::string& url,
                            bool* had_session = nullptr) {
    http_request req;
    req.method = method;
    req.url = url;
    req.headers = s_.headers;
    if (s_.auth.bearer) {
      auto token = s_.auth.bearer();
      if (!token.empty()) {
        req.headers.erase(std::remove_if(req.headers.begin(),
                                         req.headers.end(),
                                         [](const auto& h) {
                                           return strings::iequals(h.first,
                                                          "authorization");
                                         }),
                          req.headers.end());
        req.headers.emplace_back("Authorization", "Bearer " + token);
      }
    }
    std::lock_guard<std::mutex> guard{mtx_};
    if (!session_id_.empty())
      req.headers.emplace_back("Mcp-Session-Id", session_id_);
    if (had_session != nullptr)
      *had_session = !session_id_.empty();
    if (!version_.empty() && !user_version_ && !s_.sse
        && version_ >= "2025-06-18")
      req.headers.emplace_back("MCP-Protocol-Version", version_);
    req.connect_timeout = s_.connect_timeout;
    req.total_timeout = milliseconds{0}; // the session times out
    return req;
  }

  // A transfer submitted while close() runs is cancelled at once (close()
  // may have taken the in-flight set already).
  void track(http_request_id id) {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      if (!closing_) {
        inflight_.insert(id);
        return;
      }
    }
    http_.cancel(id);
  }
  void untrack(http_request_id id) {
    std::lock_guard<std::mutex> guard{mtx_};
    inflight_.erase(id);
  }

  // Handles one SSE event of `x`'s stream; false stops the transfer.
  bool on_event(exchange& x, response& rx, const sse_event& e) {
    rx.events = true;
    if (!e.id.empty())
      x.last_id = e.id;
    if (e.event != "message" || blank(e.data))
      return true; // a priming event, or one MCP does not use
    if (!x.request_id.empty()) {
      auto parsed = json::parse_members(e.data, {"id", "method"});
      if (!parsed) {
        rx.stop = "the server sent invalid JSON on the response stream ("
                  + parsed.error + ")";
        return false;
      }
      auto id = parsed.v->find("id");
      if (id != nullptr && parsed.v->find("method") == nullptr
          && id->dump() == x.request_id)
        x.replied = true;
    }
    deliver(e.data);
    return true;
  }

  // The SSE parser of a response stream; `x` and `rx` outlive it.
  std::unique_ptr<mcp_sse_stream> make_parser(exchange* x, response* rx) {
    return std::make_unique<mcp_sse_stream>(
      s_.max_message_bytes,
      [this, x, rx](const sse_event& e) { return on_event(*x, *rx, e); });
  }

  // Callbacks of a POST or GET transfer filling `rx`.
  http_callbacks receive(std::shared_ptr<exchange> x,
                         std::shared_ptr<response> rx) {
    http_callbacks cb;
    cb.on_headers = [this, x, rx](long status, const http_headers& headers) {
      rx->status = status;
      if (auto w = find_header(headers, "www-authenticate"))
        rx->www_authenticate = *w;
      if (auto sid = find_header(headers, "mcp-session-id");
          sid != nullptr && status < 300) {
        std::lock_guard<std::mutex> guard{mtx_};
        session_id_ = *sid;
      }
      if (auto ct = find_header(headers, "content-type");
          ct != nullptr && status < 300
          && ct->find("text/event-stream") != std::string::npos) {
        rx->sse = true;
        rx->parser = make_parser(x.get(), rx.get());
      }
    };
    cb.on_data = [this, rx](std::string_view chunk) {
      if (rx->sse) {
        bool ok = rx->parser->feed(chunk);
        if (!ok && rx->stop.empty())
          rx->stop = "the server's SSE stream is malformed: "
                     + rx->parser->error();
        return ok;
      }
      rx->body.append(chunk);
      if (rx->body.size() > s_.max_message_bytes) {
        rx->stop = "the server sent a message larger than "
                   + std::to_string(s_.max_message_bytes) + " bytes";
        return false;
      }
      return true;
    };
    return cb;
  }

  void submit_post(std::shared_ptr<exchange> x) {
    if (closing_)
      return;
    auto rx = std::make_shared<response>();
    std::string url;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      url = s_.sse ? endpoint_ : s_.url;
    }
    auto req = base_request("POST", url, &rx->had_session);
    req.headers.emplace_back("Content-Type", "application/json");
    req.headers.emplace_back("Accept", "application/json, text/event-stream");
    req.body = x->message;
    auto cb = receive(x, rx);
    cb.on_done = [this, x, rx](const http_response_summary& sum) {
      callback_guard last{pending_callbacks_};
      untrack(sum.id);
      if (x->undelivered) {
        x->undelivered = false;
        undelivered_.fetch_sub(1);
      }
      if (!closing_)
        post_done(x, *rx, sum);
    };
    pending_callbacks_.fetch_add(1);
    track(http_.submit(std::move(req), std::move(cb)));
  }

  // The GET stream (x->listen) or a resumption of `x`'s stream.
  void submit_get(std::shared_ptr<exchange> x) {
    if (closing_)
      return;
    auto rx = std::make_shared<response>();
    auto req = base_request("GET", s_.url, &rx->had_session);
    req.headers.emplace_back("Accept", "text/event-stream");
    if (!x->last_id.empty())
      req.headers.emplace_back("Last-Event-ID", x->last_id);
    auto cb = receive(x, rx);
    cb.on_done = [this, x, rx](const http_response_summary& sum) {
      callback_guard last{pending_callbacks_};
      untrack(sum.id);
      if (!closing_)
        get_done(x, *rx, sum);
    };
    pending_callbacks_.fetch_add(1);
    track(http_.submit(std::move(req), std::move(cb)));
  }

  // -- outcomes (HTTP client thread) ---------------------------------------

  // An error reply for `x`'s request (once), or a log line.
  void fail(exchange& x, const std::string& why) {
    if (x.replied || x.failed)
      return;
    x.failed = true;
    auto reply = error_reply_for(x.message, why);
    if (!reply.empty())
      deliver(std::move(reply));
    else
      MIBYAN_LOG(warning, "mcp", s_.server << ": " << why);
  }

  std::string http_error(const response& rx) const {
    auto why = "HTTP " + std::to_string(rx.status);
    if (!rx.www_authenticate.empty())
      why += " (WWW-Authenticate: " + rx.www_authenticate + ")";
    if (!rx.body.empty())
      why += ": " + rx.body.substr(0, 300);
    return why;
  }

  // 401/403 with an authorization hook: ask it on the worker, then send
  // again or fail. True when handled here.
  bool unauthorized(std::shared_ptr<exchange> x, const response& rx,
                    bool get) {
    if ((rx.status != 401 && rx.status != 403) || !s_.auth.on_unauthorized
        || x->auth_retried)
      return false;
    x->auth_retried = true;
    auto status = static_cast<int>(rx.status);
    auto header = rx.www_authenticate;
    auto why = http_error(rx);
    post_task(milliseconds{0}, [this, x, status, header, why, get] {
      bool again = s_.auth.on_unauthorized(status, header);
      if (!again) {
        MIBYAN_LOG(warning, "mcp", s_.server << ": not authorized: " << why);
        fail(*x, "not authorized: " + why);
      } else if (get) {
        submit_get(x);
      } else {
        submit_post(x);
      }
    });
    return true;
  }

  void post_done(std::shared_ptr<exchange> x, response& rx,
                 const http_response_summary& sum) {
    if (unauthorized(x, rx, false))
      return;
    if (rx.status == 404 && rx.had_session && !s_.sse) {
      closed(std::string{mcp_session_expired_reason} + " (HTTP 404)");
      return;
    }
    if (rx.sse) {
      x->retry_ms = rx.parser->retry_ms() >= 0 ? rx.parser->retry_ms()
                                               : x->retry_ms;
      if (x->replied || x->request_id.empty())
        return; // the reply is in; how the stream ended does not matter
      if (!rx.stop.empty()) {
        // A protocol breach (oversized event, malformed stream, invalid
        // JSON): this request fails, the connection stays.
        fail(*x, rx.stop);
        return;
      }
      if (!x->last_id.empty()) {
        // The stream broke or ended before the reply, and the server gave
        // its events ids: resume it with a GET.
        resume(x, sum.ok() ? "the response stream ended before the reply"
                           : sum.error);
        return;
      }
      if (!sum.ok()) {
        closed(sum.error);
        return;
      }
      fail(*x, "the server ended the response stream without a reply");
      return;
    }
    if (!rx.stop.empty()) {
      closed(rx.stop);
      return;
    }
    if (!sum.ok()) {
      closed(sum.error); // no response: the connection is gone
      return;
    }
    if (rx.status >= 400) {
      if (rx.status == 400 && rx.had_session
          && rx.body.find("ession") != std::string::npos) {
        // A server that names the session in a 400 forgot it too.
        closed(std::string{mcp_session_expired_reason} + " ("
               + http_error(rx) + ")");
        return;
      }
      fail(*x, http_error(rx));
      return;
    }
    // Legacy SSE replies arrive on the stream; a POST answers "Accepted".
    if (!s_.sse && !rx.body.empty() && !blank(rx.body)) {
      deliver(std::move(rx.body));
    } else if (!s_.sse && !x->request_id.empty()) {
      fail(*x, "the server answered HTTP " + std::to_string(rx.status)
                 + " without a reply");
    }
    if (x->method == "notifications/initialized" && !s_.sse && s_.listen)
      start_listening();
  }

  void get_done(std::shared_ptr<exchange> x, response& rx,
                const http_response_summary& sum) {
    const char* what = x->listen ? "the GET stream" : "resuming a stream";
    x->unreachable = rx.status == 0 && !sum.ok();
    if (unauthorized(x, rx, true))
      return;
    if (rx.status == 404 && rx.had_session) {
      closed(std::string{mcp_session_expired_reason} + " (HTTP 404)");
      return;
    }
    if (x->listen && rx.status == 405) {
      MIBYAN_LOG(debug, "mcp", s_.server << ": the server offers no GET "
                                            "stream (HTTP 405)");
      return;
    }
    if (rx.sse) {
      if (rx.parser->retry_ms() >= 0)
        x->retry_ms = rx.parser->retry_ms();
      if (!rx.stop.empty()) {
        MIBYAN_LOG(warning, "mcp", s_.server << ": " << what << ": "
                                             << rx.stop);
        if (!x->listen)
          fail(*x, rx.stop);
        return; // the listening stream stays closed after a breach
      }
      if (rx.events)
        x->failures = 0;
      else
        ++x->failures; // a stream that delivers nothing counts as failed
      if (!x->listen && (x->replied || x->failed))
        return;
      reconnect(x, sum.ok() ? "the stream ended" : sum.error);
      return;
    }
    ++x->failures;
    std::string why = !sum.ok() ? sum.error
                      : rx.status >= 400
                        ? http_error(rx)
                        : "HTTP " + std::to_string(rx.status)
                            + " without an event stream";
    if (!x->listen && sum.ok()) {
      // The server refuses to resume (unknown event id, no resumability).
      fail(*x, "the response stream broke before the reply and the server "
               "did not resume it ("
                 + why + ")");
      return;
    }
    if (x->listen && sum.ok() && rx.status < 500) {
      MIBYAN_LOG(info, "mcp", s_.server << ": no GET stream (" << why << ")");
      return;
    }
    reconnect(x, why);
  }

  // -- reconnection (worker thread) ----------------------------------------

  milliseconds delay_for(const exchange& x) const {
    if (x.retry_ms >= 0)
      return milliseconds{x.retry_ms};
    auto d = s_.reconnect_delay;
    for (int i = 1; i < x.failures && d < s_.reconnect_max_delay; ++i)
      d *= 2;
    return std::min(d, s_.reconnect_max_delay);
  }

  void resume(std::shared_ptr<exchange> x, const std::string& why) {
    ++x->failures; // reset when a resumed stream delivers events
    x->unreachable = false;
    reconnect(x, why);
  }

  void reconnect(std::shared_ptr<exchange> x, const std::string& why) {
    if (x->failures > s_.reconnect_attempts) {
      auto msg = (x->listen ? std::string{"the GET stream"}
                            : std::string{"the response stream"})
                 + " could not be reconnected after "
                 + std::to_string(s_.reconnect_attempts)
                 + " attempts (last: " + why + ")";
      MIBYAN_LOG(warning, "mcp", s_.server << ": " << msg);
      if (!x->listen && x->unreachable)
        closed(msg); // the server is gone: the next call connects afresh
      else if (!x->listen)
        fail(*x, msg);
      return;
    }
    auto delay = delay_for(*x);
    MIBYAN_LOG(debug, "mcp", s_.server << ": " << why << "; reconnecting in "
                                       << delay.count() << " ms");
    if (s_.on_reconnect_wait)
      s_.on_reconnect_wait(x->listen ? "get" : "resume", delay);
    post_task(delay, [this, x] { submit_get(x); });
  }

  void start_listening() {
    if (listening_.exchange(true))
      return;
    auto x = std::make_shared<exchange>();
    x->listen = true;
    post_task(milliseconds{0}, [this, x] { submit_get(x); });
  }

  // Runs `fn` on the worker thread after `delay` (never after close()).
  void post_task(milliseconds delay, std::function<void()> fn) {
    std::lock_guard<std::mutex> guard{wmtx_};
    if (wstop_)
      return;
    tasks_.emplace(clock::now() + delay, std::move(fn));
    if (!worker_.joinable())
      worker_ = std::thread([this] { work(); });
    wcv_.notify_all();
  }

  void work() {
    std::unique_lock<std::mutex> lock{wmtx_};
    while (!wstop_) {
      if (tasks_.empty()) {
        wcv_.wait(lock);
        continue;
      }
      auto due = tasks_.begin()->first;
      if (clock::now() < due) {
        wcv_.wait_until(lock, due);
        continue;
      }
      auto fn = std::move(tasks_.begin()->second);
      tasks_.erase(tasks_.begin());
      lock.unlock();
      fn();
      lock.lock();
    }
  }

  void stop_worker() {
    {
      std::lock_guard<std::mutex> guard{wmtx_};
      wstop_ = true;
      tasks_.clear();
      wcv_.notify_all();
    }
    if (worker_.joinable() && worker_.get_id() != std::this_thread::get_id())
      worker_.join();
    else if (worker_.joinable())
      worker_.detach();
  }

  // -- legacy SSE ------------------------------------------------------------

  // Opens the stream and waits for its `endpoint` event.
  status start_legacy(milliseconds timeout) {
    auto req = base_request("GET", s_.url);
    req.headers.emplace_back("Accept", "text/event-stream");
    auto parser = std::make_shared<mcp_sse_stream>(
      s_.max_message_bytes, [this](const sse_event& e) {
        if (e.event == "endpoint") {
          std::lock_guard<std::mutex> guard{mtx_};
          endpoint_ = e.data.rfind("http", 0) == 0 ? e.data
                                                   : origin_of(s_.url) + e.data;
          cv_.notify_all();
        } else if (e.event == "message" && !blank(e.data)) {
          deliver(e.data);
        }
        return true;
      });
    http_callbacks cb;
    cb.on_headers = [this](long status, const http_headers&) {
      if (status >= 400) {
        std::lock_guard<std::mutex> guard{mtx_};
        stream_error_ = "HTTP " + std::to_string(status);
      }
    };
    cb.on_data = [this, parser](std::string_view chunk) {
      bool ok = parser->feed(chunk);
      if (!ok) {
        std::lock_guard<std::mutex> guard{mtx_};
        stream_error_ = "the SSE stream is malformed: " + parser->error();
      }
      return ok;
    };
    cb.on_done = [this](const http_response_summary& sum) {
      callback_guard last{pending_callbacks_};
      std::string why;
      {
        std::lock_guard<std::mutex> guard{mtx_};
        stream_done_ = true;
        why = !stream_error_.empty() ? stream_error_
              : !sum.error.empty()   ? sum.error
                                     : std::string{"the SSE stream ended"};
        stream_error_ = why;
        cv_.notify_all();
      }
      if (!closing_ && started_)
        closed(why);
    };
    pending_callbacks_.fetch_add(1);
    stream_id_ = http_.submit(std::move(req), std::move(cb));
    std::unique_lock<std::mutex> lock{mtx_};
    bool got = cv_.wait_for(lock, timeout, [&] {
      return !endpoint_.empty() || stream_done_;
    });
    if (!endpoint_.empty()) {
      started_ = true;
      return {};
    }
    lock.unlock();
    http_.cancel(stream_id_);
    if (!got)
      return status::failure(status_code::timeout,
                             "no endpoint event from the SSE stream in time");
    return status::failure(status_code::unavailable,
                           "SSE stream failed: " + stream_error_);
  }

  // -- delivery ----------------------------------------------------------------

  void deliver(std::string msg) {
    if (h_.on_message && !closing_)
      h_.on_message(std::move(msg));
  }
  void closed(const std::string& why) {
    if (closing_ || closed_once_.exchange(true))
      return;
    if (h_.on_closed)
      h_.on_closed(why);
  }

  mcp_http_settings s_;
  http_client& http_;
  handlers h_;

  std::mutex mtx_; // the fields up to inflight_
  std::condition_variable cv_;
  std::string session_id_;
  std::string version_;
  bool user_version_ = false;
  std::string endpoint_;
  bool stream_done_ = false;
  std::string stream_error_;
  std::set<http_request_id> inflight_;
  std::atomic<int> undelivered_{0}; // see mcp_transport::undelivered

  std::atomic<http_request_id> stream_id_{0};
  std::atomic<int> pending_callbacks_{0};
  std::atomic<bool> closing_{false};
  std::atomic<bool> closed_once_{false};
  std::atomic<bool> listening_{false};
  bool started_ = false;

  std::mutex wmtx_; // the worker's queue
  std::condition_variable wcv_;
  std::multimap<clock::time_point, std::function<void()>> tasks_;
  bool wstop_ = false;
  std::thread worker_;
};

} // namespace

std::unique_ptr<mcp_transport> make_mcp_http_transport(mcp_http_settings s,
                                                       http_client& http) {
  return std::make_unique<http_transport>(std::move(s), http);
}

} // namespace mibyan
