// Turns of `mibyan serve` (docs/serve.md): admission and the running of a
// turn, shared by chat completions and the Responses API
// (serve/responses_route.cpp); a POST /v1/chat/completions request becomes
// an agent turn; its answer is one JSON response or an SSE stream with
// keep-alive comments. Stateless
// requests (no X-Mibyan-Session) leave no session behind
// (serve/stateless.cpp).
#include "serve/connection.hpp"

#include <sys/socket.h>

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>

#include "base/json.hpp"
#include "base/log.hpp"
#include "agent/turn_result.hpp"
#include "messages/turn_request.hpp"
#include "serve/openai_chat.hpp"
#include "serve/routes.hpp"

namespace mibyan {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

bool serve_connection::json_body() {
  auto ct = std::string{req_[http::field::content_type]};
  auto semi = ct.find(';');
  auto base = ct.substr(0, semi);
  while (!base.empty() && base.back() == ' ')
    base.pop_back();
  if (beast::iequals(base, "application/json"))
    return true;
  send_error(http::status::unsupported_media_type,
             "Content-Type must be application/json (got '" + ct + "')",
             "invalid_request_error", "unsupported_media_type");
  return false;
}

bool serve_connection::model_served(const std::string& model) {
  if (model.empty() || model == srv_->cfg.model_id || model == "mibyan")
    return true;
  send_error(http::status::not_found,
             "the model '" + model + "' does not exist on this node "
             "(it serves '" + srv_->cfg.model_id + "')",
             "invalid_request_error", "model_not_found");
  return false;
}

bool serve_connection::admit_turn() {
  if (srv_->stopping) {
    send_error(http::status::service_unavailable,
               "the server is shutting down", "server_error",
               "shutting_down");
    return false;
  }
  auto max = srv_->cfg.limits.max_concurrent_turns;
  if (srv_->turns.fetch_add(1) >= max) {
    --srv_->turns;
    extra_headers_.emplace_back("Retry-After", "1");
    send_error(http::status::too_many_requests,
               "too many turns are running (server.max_concurrent_turns = "
                 + std::to_string(max) + "); retry later",
               "rate_limit_error", "rate_limit_exceeded");
    return false;
  }
  return true;
}

void serve_connection::release_turn_slot() {
  --srv_->turns;
}

void serve_connection::chat() {
  if (!json_body())
    return;
  chat_completion_request cr;
  if (auto st = parse_chat_completion(
        req_.body(), cr,
        static_cast<size_t>(srv_->cfg.limits.max_messages));
      !st) {
    send_error(http::status::bad_request, st.error, "invalid_request_error",
               st.code == status_code::resource_exhausted
                 ? "too_many_messages"
                 : "invalid_request");
    return;
  }
  req_.body() = std::string{}; // parsed: its memory goes now
  if (!model_served(cr.model))
    return;
  auto header = std::string{req_["X-Mibyan-Session"]};
  if (!header.empty() && !serve::valid_session_id(header)) {
    send_error(http::status::bad_request,
               "X-Mibyan-Session must be 1 to 128 characters of "
               "A-Z a-z 0-9 _ . : -",
               "invalid_request_error", "bad_session_id");
    return;
  }
  // docs/serve.md, "Idempotent turns": a stateful turn sent again with
  // the same key is not stored or run twice.
  auto turn_key = std::string{req_["Idempotency-Key"]};
  if (!valid_turn_key(turn_key)) {
    send_error(http::status::bad_request,
               "Idempotency-Key must be 1 to 200 printable ASCII characters "
               "without spaces",
               "invalid_request_error", "bad_idempotency_key");
    return;
  }
  if (!admit_turn())
    return;
  api_ = turn_api::chat;
  stateful_ = !header.empty();
  session_ = stateful_ ? header : srv_->stateless_id();
  stream_mode_ = cr.stream;
  include_usage_ = cr.include_usage;
  id_ = serve::completion_id();
  created_ = serve::now_seconds();
  model_ = srv_->cfg.model_id;
  turn_call call = srv_->cfg.turn;
  call.prompt = std::move(cr.prompt);
  call.history = std::move(cr.history);
  // A stateless request's session is new every time: nothing to repeat.
  if (stateful_)
    call.turn_key = std::move(turn_key);
  run_turn(std::move(call), false);
}

void serve_connection::run_turn(turn_call call, bool reserved) {
  {
    std::lock_guard<std::mutex> g{srv_->mtx};
    if (!reserved)
      srv_->running.insert(session_);
    if (!stateful_)
      srv_->stateless.insert(session_);
  }
  hold_busy();
  call.session_id = session_;
  // Stateless sessions are deleted when the turn ends; their source tells
  // a leftover (the process was killed mid-turn) from a kept session.
  call.source = stateful_ ? "api" : "api-stateless";
  call.stream = true;
  auto weak = std::weak_ptr<serve_connection>(shared_from_this());
  auto ex = stream_.get_executor();
  // A response lists the turn's tool activity even when not streamed.
  if (stream_mode_ || api_ == turn_api::responses) {
    call.on_delta = [weak, ex](const std::string& kind,
                               const std::string& text) {
      if (auto self = weak.lock())
        self->srv_->post_if_open(ex, [self, kind, text] {
          self->on_delta(kind, text);
        });
    };
    // Tool events share the stream.
    call.on_tool = [weak, ex](const tool_event& ev) {
      if (auto self = weak.lock())
        self->srv_->post_if_open(ex, [self, ev] { self->on_tool(ev); });
    };
  }
  if (stream_mode_) {
    start_stream();
    // Approvals and questions of this session appear on the stream.
    const auto& c = config_of(srv_->rt);
    if (c.approvals.http == "pending" || c.clarify.http == "pending")
      watch_pending();
  }
  // Keeps the connection alive until the turn ends.
  auto self = shared_from_this();
  watch_disconnect();
  auto root = stateful_ ? std::string{} : session_;
  srv_->rt.run_turn_async(call, [self, ex, root](turn_result out) {
    auto answer = [self, ex, out = std::move(out)]() mutable {
      self->srv_->post_if_open(ex, [self, out = std::move(out)]() mutable {
        self->on_turn_done(std::move(out));
      });
    };
    // The client hears the end at once; a stateless session is deleted
    // right after, on the store thread, off the answer's path.
    answer();
    if (!root.empty())
      self->srv_->discard_stateless(root, {});
  });
}

// While a turn runs, a readable socket that reads EOF means the client
// left: interrupt the turn (what was done is persisted).
void serve_connection::watch_disconnect() {
  stream_.socket().async_wait(
    tcp::socket::wait_read,
    [self = shared_from_this()](beast::error_code ec) {
      if (ec || !(self->in_turn_ || self->live_))
        return;
      char c;
      auto n = ::recv(self->stream_.socket().native_handle(), &c, 1,
                      MSG_PEEK | MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
        self->client_gone();
      // n > 0: a pipelined request waits for this turn's answer.
    });
  if (!live_)
    in_turn_ = true;
}

void serve_connection::client_gone() {
  if (gone_)
    return;
  gone_ = true;
  if (live_) {
    live_stop();
    log_access();
    close();
    return;
  }
  if (in_turn_)
    srv_->rt.interrupt(session_, "the HTTP client disconnected");
}

void serve_connection::on_turn_done(turn_result out) {
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
  // A stateless session's conversation is closed by discard_stateless.
  keepalive_.cancel();
  unwatch_pending();
  if (api_ == turn_api::responses)
    finish_response(std::move(out));
  else
    finish_turn(std::move(out));
}

bool serve_connection::begin_answer(const std::string& session) {
  if (gone_) {
    status_ = 499; // logged as "client closed the request"
    log_access();
    close();
    return false;
  }
  if (stateful_)
    extra_headers_.emplace_back("X-Mibyan-Session", session);
  return true;
}

// Maps a turn outcome to the response.
void serve_connection::finish_turn(turn_result out) {
  auto s = serve::summarize_turn(out, session_);
  if (!begin_answer(session_))
    return;
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

void serve_connection::start_stream() {
  if (stateful_)
    extra_headers_.emplace_back("X-Mibyan-Session", session_);
  begin_sse();
  if (api_ == turn_api::responses) {
    response_delta("start", {});
  } else {
    json::value d;
    d["role"] = "assistant";
    d["content"] = "";
    push(chunk_event(id_, created_, model_, d, "", json::value{}));
  }
}

void serve_connection::begin_sse() {
  sse_res_ = std::make_shared<http::response<http::empty_body>>(
    http::status::ok, req_.version());
  auto& r = *sse_res_;
  r.set(http::field::server, "mibyan");
  r.set(http::field::content_type, "text/event-stream");
  r.set(http::field::cache_control, "no-cache");
  for (auto& [k, v] : extra_headers_)
    r.set(k, v);
  extra_headers_.clear();
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
  last_output_ = std::chrono::steady_clock::now();
  arm_keepalive();
}

// While the turn runs, server.keepalive_s after the last output the stream
// gets an SSE comment (clients ignore it; proxies see traffic).
void serve_connection::arm_keepalive() {
  keepalive_.expires_at(last_output_
                        + std::chrono::seconds(srv_->cfg.limits.keepalive_s));
  keepalive_.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (ec || self->gone_
        || !((self->stream_mode_ && self->in_turn_) || self->live_))
      return;
    if (std::chrono::steady_clock::now() - self->last_output_
        >= std::chrono::seconds(self->srv_->cfg.limits.keepalive_s))
      self->push(": keep-alive\n\n");
    self->arm_keepalive();
  });
}

void serve_connection::on_delta(const std::string& kind,
                                const std::string& text) {
  if (gone_)
    return;
  if (api_ == turn_api::responses) {
    response_delta(kind, text);
    return;
  }
  json::value ext;
  if (kind == "text") {
    round_text_ += text;
    json::value d;
    d["content"] = text;
    push(chunk_event(id_, created_, model_, d, "", json::value{}));
    return;
  }
  if (kind == "reasoning") {
    ext["type"] = "reasoning";
    ext["text"] = text;
  } else if (kind == "restart") {
    round_text_.clear();
    ext["type"] = "restart";
  } else if (kind == "stream_stopped") {
    // The holder of a forwarded turn stopped its stream (docs/cluster.md,
    // "Streaming of forwarded turns"): the round's text so far is void,
    // the whole answer comes in the last content chunk.
    round_text_.clear();
    ext["type"] = "stream_stopped";
    ext["message"] = text;
  } else {
    return;
  }
  push(chunk_event(id_, created_, model_, json::value{}, "", ext));
}

void serve_connection::on_tool(const tool_event& ev) {
  if (gone_)
    return;
  if (api_ == turn_api::responses) {
    response_tool(ev);
    return;
  }
  round_text_.clear();
  json::value ext;
  ext["type"] = tool_event_kind(ev);
  ext["tool"] = tool_event_json(ev);
  push(chunk_event(id_, created_, model_, json::value{}, "", ext));
}

void serve_connection::push(std::string event) {
  last_output_ = std::chrono::steady_clock::now();
  out_.push_back(std::make_shared<std::string>(std::move(event)));
  pump();
}

void serve_connection::push_last() {
  out_.push_back(nullptr);
  pump();
}

void serve_connection::pump() {
  if (live_ && live_due_ && out_.empty() && !writing_ && !gone_) {
    live_due_ = false;
    live_refill();
  }
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

} // namespace mibyan
