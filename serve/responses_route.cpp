// The Responses API of `mibyan serve` (docs/serve.md, "Responses API"):
// POST /v1/responses runs an agent turn (through the turn plumbing that
// chat completions use, serve/chat.cpp) and answers a response object or
// its SSE events (serve/responses.hpp); GET and DELETE
// /v1/responses/{id} read and delete stored responses.
//
// Sessions: a stored response (store: true) names the session its turn ran
// in and the last message of that session when it ended. A request with
// previous_response_id continues that session when the response is still
// its latest state (and no other turn of it runs), and otherwise branches:
// a new session seeded with the history up to that response. store: false
// runs as a stateless chat request does (serve/stateless.cpp): nothing is
// kept. Store reads and writes run on the server's store thread; the
// response record is queued there before the client gets the end of the
// answer, so a request that names it next finds it.
#include "serve/connection.hpp"

#include <boost/asio/post.hpp>

#include "base/log.hpp"
#include "messages/turn_request.hpp"
#include "serve/openai_chat.hpp"
#include "serve/responses.hpp"
#include "serve/routes.hpp"
#include "storage/session_store.hpp"

namespace mibyan {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;

/// The Responses API request a connection is answering.
struct response_turn {
  response_builder builder;
  bool store = true;
};

namespace {

std::string previous_missing(const std::string& id) {
  return "previous_response_id '" + id
         + "' names no stored response (unknown, deleted, made with "
           "store: false, or its session was deleted)";
}

// A stored response object whose turn completed (replayed as it is; a
// failed or interrupted one is run again under its key).
bool completed_object(const std::string& object_json) {
  auto parsed = json::parse(object_json);
  return parsed && parsed.v->is_object()
         && parsed.v->get_string("status") == "completed";
}

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

// On the store thread: writes `rec` with the session's last message id,
// then drops it from the live responses.
void store_response(http_server::impl& srv, stored_response rec) {
  if (auto store = session_store_of(srv.rt)) {
    auto last = store->last_message_id(rec.session_id);
    auto st = last ? (rec.last_message_id = *last, store->put_response(rec))
                   : last.get_status();
    if (!st)
      MIBYAN_LOG(warning, "serve",
                 "response " << rec.id << " not stored: " << st.error);
  }
  std::lock_guard<std::mutex> g{srv.mtx};
  srv.live_responses.erase(rec.id);
}

} // namespace

void serve_connection::responses(const std::string& path) {
  auto method = req_.method();
  if (path == "/v1/responses") {
    if (method != http::verb::post)
      return method_not_allowed();
    create_response();
    return;
  }
  auto id = path.substr(std::string{"/v1/responses/"}.size());
  if (id.find('/') != std::string::npos) {
    send_error(http::status::not_found,
               "no such endpoint: " + path
                 + " (input_items and cancel are not offered)",
               "invalid_request_error", "not_found");
    return;
  }
  if (method != http::verb::get && method != http::verb::delete_)
    return method_not_allowed();
  if (auto err = check_response_id(id).error; !err.empty()) {
    send_json(http::status::bad_request,
              error_body_param("malformed response id: " + err,
                               "invalid_request_error", "bad_response_id",
                               "response_id"));
    return;
  }
  bool del = method == http::verb::delete_;
  {
    // A response not yet in the store: its turn runs, or its record is
    // queued on the store thread (which a delete then follows).
    std::unique_lock<std::mutex> g{srv_->mtx};
    auto live = srv_->live_responses.find(id);
    if (live != srv_->live_responses.end()) {
      if (!del) {
        auto body = live->second.object_json;
        g.unlock();
        send_json(http::status::ok, std::move(body));
        return;
      }
      if (!live->second.done) {
        g.unlock();
        send_error(http::status::conflict,
                   "response '" + id + "' is still in progress; delete it "
                   "when its turn has ended",
                   "invalid_request_error", "response_in_progress");
        return;
      }
    }
  }
  auto store = session_store_of(srv_->rt);
  if (!store) {
    store_unavailable();
    return;
  }
  hold_busy();
  net::post(srv_->store_pool, [self = shared_from_this(), store, id, del] {
    serve::api_reply r;
    if (del) {
      auto st = store->delete_response(id);
      if (st) {
        json::value v;
        v["id"] = id;
        v["object"] = "response.deleted";
        v["deleted"] = true;
        r.body = v.dump();
      } else if (st.code == status_code::not_found) {
        r = {404, "no response '" + id + "'", "response_not_found"};
      } else {
        r = {500, st.error, "store_error"};
      }
    } else if (auto got = store->get_response(id)) {
      r.body = std::move(got->object_json);
    } else if (got.code == status_code::not_found) {
      r = {404, "no response '" + id + "'", "response_not_found"};
    } else {
      r = {500, got.error, "store_error"};
    }
    net::post(self->stream_.get_executor(), [self, r = std::move(r)] {
      auto st = static_cast<http::status>(r.status);
      if (r.status == 200)
        self->send_json(st, r.body);
      else
        self->send_error(st, r.body,
                         r.status >= 500 ? "server_error"
                                         : "invalid_request_error",
                         r.code);
    });
  });
}

void serve_connection::create_response() {
  if (!json_body())
    return;
  responses_request rr;
  responses_refusal why;
  if (!parse_responses_request(
        req_.body(), rr, static_cast<size_t>(srv_->cfg.limits.max_messages),
        why)) {
    send_json(http::status::bad_request,
              error_body_param(why.message, "invalid_request_error",
                               why.code, why.param));
    return;
  }
  req_.body() = std::string{}; // parsed: its memory goes now
  if (!model_served(rr.model))
    return;
  // docs/serve.md, "Idempotent responses".
  auto key = std::string{req_["Idempotency-Key"]};
  if (!valid_turn_key(key)) {
    send_error(http::status::bad_request,
               "Idempotency-Key must be 1 to 200 printable ASCII characters "
               "without spaces",
               "invalid_request_error", "bad_idempotency_key");
    return;
  }
  // store: false keeps nothing to replay (as a stateless chat request).
  if (!rr.store)
    key.clear();
  if (!key.empty()) {
    keyed_response(std::move(rr), std::move(key));
    return;
  }
  begin_response(std::move(rr), {});
}

void serve_connection::keyed_response(responses_request rr, std::string key) {
  auto id = keyed_response_id(key);
  {
    // The key's first attempt on this gateway: still running, or ended
    // with its record queued on the store thread.
    std::unique_lock<std::mutex> g{srv_->mtx};
    auto live = srv_->live_responses.find(id);
    if (live != srv_->live_responses.end()) {
      if (live->second.done) {
        auto body = live->second.object_json;
        g.unlock();
        if (completed_object(body)) {
          replay_response(body, {}, rr.stream);
          return;
        }
        // Failed or interrupted: the store thread has its record next; the
        // lookup below finds it and the turn is resumed.
      } else {
        g.unlock();
        extra_headers_.emplace_back("Retry-After", "1");
        send_error(http::status::conflict,
                   "a request with this Idempotency-Key is still running; "
                   "retry when it has ended",
                   "invalid_request_error", "response_in_progress");
        return;
      }
    }
  }
  auto store = session_store_of(srv_->rt);
  if (!store) {
    store_unavailable();
    return;
  }
  hold_busy();
  net::post(srv_->store_pool, [self = shared_from_this(), store, id,
                               rr = std::move(rr),
                               key = std::move(key)]() mutable {
    auto got = store->get_response(id);
    net::post(self->stream_.get_executor(),
              [self, got = std::move(got), rr = std::move(rr),
               key = std::move(key)]() mutable {
                if (got && completed_object(got->object_json)) {
                  self->replay_response(got->object_json, got->session_id,
                                        rr.stream);
                } else if (got || got.code == status_code::not_found) {
                  // Never stored, or failed / interrupted: run it; a turn
                  // that stored its message resumes (turn keys).
                  self->begin_response(std::move(rr), std::move(key));
                } else {
                  self->send_error(is_retryable(got.code)
                                     ? http::status::service_unavailable
                                     : http::status::internal_server_error,
                                   got.error, "server_error",
                                   is_retryable(got.code) ? "store_unavailable"
                                                          : "store_error");
                }
              });
  });
}

void serve_connection::replay_response(const std::string& object_json,
                                       const std::string& session,
                                       bool stream) {
  auto parsed = json::parse(object_json);
  if (!parsed || !parsed.v->is_object()) {
    send_error(http::status::internal_server_error,
               "the stored response cannot be read: " + parsed.error,
               "server_error", "store_error");
    return;
  }
  auto& obj = *parsed.v;
  // Nothing ran: the first attempt's answer (as chat completions say).
  obj["mibyan"]["replayed"] = true;
  auto sid = session.empty() ? obj["mibyan"].get_string("session_id")
                             : session;
  api_ = turn_api::responses;
  stateful_ = true;
  session_ = sid;
  if (!sid.empty())
    extra_headers_.emplace_back("X-Mibyan-Session", sid);
  if (!stream) {
    send_json(http::status::ok, obj.dump());
    return;
  }
  stream_mode_ = true;
  begin_sse();
  push(replay_response_events(obj));
  push_last();
}

void serve_connection::begin_response(responses_request rr, std::string key) {
  auto store = session_store_of(srv_->rt);
  if (!store && (rr.store || !rr.previous_response_id.empty())) {
    store_unavailable();
    return;
  }
  if (!admit_turn())
    return;
  api_ = turn_api::responses;
  stream_mode_ = rr.stream;
  stateful_ = rr.store;
  model_ = srv_->cfg.model_id;
  created_ = serve::now_seconds();
  id_ = key.empty() ? response_id() : keyed_response_id(key);
  json::value echo;
  echo["instructions"] = rr.instructions;
  echo["metadata"] = rr.metadata;
  echo["previous_response_id"] = rr.previous_response_id.empty()
                                   ? json::value{}
                                   : json::value{rr.previous_response_id};
  echo["store"] = rr.store;
  resp_ = std::make_shared<response_turn>(response_turn{
    response_builder{id_, created_, model_, std::move(echo), rr.stream},
    rr.store});
  turn_call call = srv_->cfg.turn;
  call.prompt = std::move(rr.prompt);
  // A retried key resumes the first attempt's turn in its session (the
  // conversation's turn keys: docs/serve.md, "Idempotent turns").
  call.turn_key = key;
  if (rr.previous_response_id.empty()) {
    session_ = !key.empty()  ? keyed_session_id(key)
               : rr.store    ? srv_->cfg.new_session_id()
                             : srv_->stateless_id();
    call.history = history_of(rr.earlier);
    start_response(std::move(call), false);
    return;
  }
  // The previous response's session: continue it or branch from it. Store
  // reads, on the store thread.
  hold_busy();
  auto srv = srv_;
  net::post(srv->store_pool, [self = shared_from_this(), srv, store,
                              rr = std::move(rr),
                              call = std::move(call)]() mutable {
    serve::api_reply err;
    std::string session;
    bool reserved = false;
    auto prev = store->get_response(rr.previous_response_id);
    auto last = prev ? store->last_message_id(prev->session_id)
                     : store_result<uint64_t>{};
    bool running = false;
    if (!prev && prev.code == status_code::not_found) {
      std::lock_guard<std::mutex> g{srv->mtx};
      running = srv->live_responses.count(rr.previous_response_id) > 0;
    }
    if (running) {
      err = {409,
             "previous_response_id '" + rr.previous_response_id
               + "' names a response that is still in progress; continue "
                 "from it when its turn has ended",
             "response_in_progress"};
    } else if (!prev || !last) {
      auto st = !prev ? prev.get_status() : last.get_status();
      err = st.code == status_code::not_found
              ? serve::api_reply{404,
                                 previous_missing(rr.previous_response_id),
                                 "response_not_found"}
              : serve::api_reply{500, st.error, "store_error"};
    } else {
      // Continue in place: the response is the session's latest state, the
      // request adds one user message, and no other turn of it runs (the
      // check and the claim are one step under the server's lock).
      // A retried key whose first attempt stored its user message right
      // after the response continues in place too (and resumes that turn).
      bool retried = false;
      if (rr.store && rr.earlier.empty() && !call.turn_key.empty()
          && *last != prev->last_message_id)
        if (auto msgs = store->load_messages(prev->session_id))
          for (auto& m : *msgs)
            if (m.id > prev->last_message_id) {
              // The conversation stores a keyed turn's user message
              // under "turn:<key>" (actors/conversation_keys.cpp).
              retried = m.message.role == "user"
                        && m.key == "turn:" + call.turn_key;
              break;
            }
      if (rr.store && rr.earlier.empty()
          && (*last == prev->last_message_id || retried)) {
        std::lock_guard<std::mutex> g{srv->mtx};
        if (srv->running.count(prev->session_id) == 0) {
          srv->running.insert(prev->session_id);
          reserved = true;
          session = prev->session_id;
        }
      }
      if (!reserved) {
        // Branch: a new session holding the history up to the response.
        auto msgs = store->load_messages(prev->session_id);
        if (!msgs) {
          err = msgs.code == status_code::not_found
                  ? serve::api_reply{404,
                                     previous_missing(
                                       rr.previous_response_id),
                                     "response_not_found"}
                  : serve::api_reply{500, msgs.error, "store_error"};
        } else {
          std::vector<chat_message> history;
          for (auto& m : *msgs)
            if (m.id <= prev->last_message_id)
              history.push_back(std::move(m.message));
          for (auto& m : rr.earlier)
            history.push_back(std::move(m));
          call.history = history_of(std::move(history));
        }
      }
    }
    net::post(self->stream_.get_executor(),
              [self, err = std::move(err), session = std::move(session),
               reserved, call = std::move(call)]() mutable {
                if (err.status != 200) {
                  self->release_turn_slot();
                  self->send_error(static_cast<http::status>(err.status),
                                   err.body,
                                   err.status >= 500
                                     ? "server_error"
                                     : "invalid_request_error",
                                   err.code);
                  return;
                }
                if (session.empty())
                  session = !call.turn_key.empty()
                              ? keyed_session_id(call.turn_key)
                            : self->stateful_
                              ? self->srv_->cfg.new_session_id()
                              : self->srv_->stateless_id();
                self->session_ = std::move(session);
                self->start_response(std::move(call), reserved);
              });
  });
}

void serve_connection::start_response(turn_call call, bool reserved) {
  if (resp_->store) {
    std::lock_guard<std::mutex> g{srv_->mtx};
    srv_->live_responses[id_] = {false, resp_->builder.object().dump()};
  }
  run_turn(std::move(call), reserved);
}

void serve_connection::response_delta(const std::string& kind,
                                      const std::string& text) {
  if (!resp_)
    return;
  auto& b = resp_->builder;
  std::string ev;
  if (kind == "start")
    ev = b.start();
  else if (kind == "text")
    ev = b.text(text);
  else if (kind == "restart")
    ev = b.restart();
  else if (kind == "stream_stopped") {
    // A forwarded turn's stream stopped (docs/cluster.md): the open
    // message ends incomplete, the answer comes whole at the end.
    ev = b.restart();
    json::value d;
    d["message"] = text;
    ev += b.extension("stream_stopped", std::move(d));
  }
  // Reasoning is not reported (docs/serve.md).
  if (stream_mode_ && !ev.empty() && !gone_)
    push(std::move(ev));
}

void serve_connection::response_tool(const tool_event& ev) {
  if (!resp_)
    return;
  auto out = resp_->builder.tool(ev);
  if (stream_mode_ && !out.empty() && !gone_)
    push(std::move(out));
}

void serve_connection::response_extension(const std::string& name,
                                          json::value data) {
  if (!resp_ || !stream_mode_ || gone_)
    return;
  auto ev = resp_->builder.extension(name, std::move(data));
  if (!ev.empty())
    push(std::move(ev));
}

void serve_connection::finish_response(turn_result out) {
  auto sid = out.session_id.empty() ? session_ : out.session_id;
  auto s = serve::summarize_turn(out, sid);
  response_end end;
  end.status = s.ok ? "completed" : s.interrupted ? "incomplete" : "failed";
  end.answer = s.answer;
  end.error = s.message;
  end.usage = s.usage;
  end.ext = s.ext;
  auto& b = resp_->builder;
  auto last_events = b.finish(end);
  // Kept before the client hears the end (the store thread runs its jobs
  // in order, so a request naming this response next finds it).
  if (resp_->store) {
    stored_response rec;
    rec.id = b.id();
    rec.session_id = sid;
    rec.created_at_ms = now_ms();
    rec.object_json = b.object().dump();
    std::lock_guard<std::mutex> g{srv_->mtx};
    auto live = srv_->live_responses.find(rec.id);
    if (s.not_started || srv_->store_closed) {
      // Nothing to keep (no session), or the store thread is gone.
      if (live != srv_->live_responses.end())
        srv_->live_responses.erase(live);
    } else {
      if (live != srv_->live_responses.end())
        live->second = {true, rec.object_json};
      auto srv = srv_;
      net::post(srv_->store_pool, [srv, rec = std::move(rec)]() mutable {
        store_response(*srv, std::move(rec));
      });
    }
  }
  if (!begin_answer(sid))
    return;
  if (stream_mode_) {
    push(std::move(last_events));
    push_last();
    return;
  }
  if (s.not_started) {
    send_error(http::status::internal_server_error, s.message,
               "server_error", "turn_not_started");
    return;
  }
  send_json(http::status::ok, b.object().dump());
}

} // namespace mibyan
