// The MCP client's HTTP transport (tools/mcp/mcp_http.hpp), part:
// requests, their outcomes, delivery and close. Resumption, reconnection
// and the legacy SSE start are in tools/mcp/mcp_http_reconnect.cpp; the
// class is declared in tools/mcp/mcp_http_transport.hpp.
#include "tools/mcp/mcp_http.hpp"

#include "base/json.hpp"
#include "base/log.hpp"
#include "tools/mcp/mcp_http_transport.hpp"
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

namespace mcp_http_detail {

namespace {

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

} // namespace

http_transport::http_transport(mcp_http_settings s, http_client& http)
  : s_(std::move(s)), http_(http) {
  for (auto& [k, v] : s_.headers)
    if (strings::iequals(k, "mcp-protocol-version"))
      user_version_ = true;
}

status http_transport::start(handlers h, milliseconds timeout) {
  h_ = std::move(h);
  if (!s_.sse)
    return {};
  return start_legacy(timeout);
}

status http_transport::send(const std::string& message) {
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

status http_transport::drain(milliseconds timeout) {
  std::unique_lock<std::mutex> lock{mtx_};
  if (cv_.wait_for(lock, timeout,
                   [&] { return undelivered_.load() == 0 || closing_; }))
    return {};
  return status::failure(status_code::timeout,
                         "the server did not accept a notification in time");
}

void http_transport::close() {
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

http_request http_transport::base_request(const std::string& method, const std::string& url,
                          bool* had_session) {
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

void http_transport::track(http_request_id id) {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (!closing_) {
      inflight_.insert(id);
      return;
    }
  }
  http_.cancel(id);
}

bool http_transport::on_event(exchange& x, response& rx, const sse_event& e) {
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

http_callbacks http_transport::receive(std::shared_ptr<exchange> x,
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

void http_transport::submit_post(std::shared_ptr<exchange> x) {
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
    if (!closing_)
      post_done(x, *rx, sum);
    if (x->undelivered) {
      // After post_done: a drain() that returns sees its outcome (a 404
      // has closed the session by then).
      x->undelivered = false;
      std::lock_guard<std::mutex> guard{mtx_};
      undelivered_.fetch_sub(1);
      cv_.notify_all();
    }
  };
  pending_callbacks_.fetch_add(1);
  track(http_.submit(std::move(req), std::move(cb)));
}

void http_transport::submit_get(std::shared_ptr<exchange> x) {
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

void http_transport::fail(exchange& x, const std::string& why) {
  if (x.replied || x.failed)
    return;
  x.failed = true;
  auto reply = error_reply_for(x.message, why);
  if (!reply.empty())
    deliver(std::move(reply));
  else
    MIBYAN_LOG(warning, "mcp", s_.server << ": "
                                         << (x.method.empty() ? std::string{"a reply"}
                                                              : "'" + x.method + "'")
                                         << " failed: " << why);
}

// This request's own answer, so the server did not run it: it fails with
// the expired reason (the session sends it once more on a new session).
// Requests still in flight fail as "connection lost" when the transport
// closes, and are not repeated: the server may have run them.
void http_transport::session_expired(exchange& x, const std::string& detail) {
  auto why = std::string{mcp_session_expired_reason} + " (" + detail + ")";
  fail(x, why);
  closed(why);
}

std::string http_transport::http_error(const response& rx) const {
  auto why = "HTTP " + std::to_string(rx.status);
  if (!rx.www_authenticate.empty())
    why += " (WWW-Authenticate: " + rx.www_authenticate + ")";
  if (!rx.body.empty())
    why += ": " + rx.body.substr(0, 300);
  return why;
}

bool http_transport::unauthorized(std::shared_ptr<exchange> x, const response& rx,
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

void http_transport::post_done(std::shared_ptr<exchange> x, response& rx,
               const http_response_summary& sum) {
  if (unauthorized(x, rx, false))
    return;
  if (rx.status == 404 && rx.had_session && !s_.sse) {
    session_expired(*x, "HTTP 404");
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
      session_expired(*x, http_error(rx));
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

void http_transport::get_done(std::shared_ptr<exchange> x, response& rx,
              const http_response_summary& sum) {
  const char* what = x->listen ? "the GET stream" : "resuming a stream";
  x->unreachable = rx.status == 0 && !sum.ok();
  if (unauthorized(x, rx, true))
    return;
  if (rx.status == 404 && rx.had_session) {
    if (x->listen) {
      // The server forgot the session. The connection stays until a
      // request learns it from its own 404 (and is then sent again on a
      // new session): closing here would fail requests still in flight,
      // which the server may already have run.
      MIBYAN_LOG(info, "mcp", s_.server << ": the GET stream ended: "
                                        << mcp_session_expired_reason);
      return;
    }
    session_expired(*x, "HTTP 404");
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

void http_transport::closed(const std::string& why) {
  if (closing_ || closed_once_.exchange(true))
    return;
  if (h_.on_closed)
    h_.on_closed(why);
}

} // namespace mcp_http_detail

std::unique_ptr<mcp_transport> make_mcp_http_transport(mcp_http_settings s,
                                                       http_client& http) {
  return std::make_unique<mcp_http_detail::http_transport>(std::move(s), http);
}

} // namespace mibyan
