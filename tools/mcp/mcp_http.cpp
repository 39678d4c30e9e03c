#include "tools/mcp/mcp_http.hpp"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

#include "base/http_client.hpp"
#include "base/json.hpp"
#include "base/log.hpp"

namespace mibyan {

bool mcp_sse_stream::feed(std::string_view chunk) {
  events_.clear();
  bool ok = parser_.feed(chunk, events_);
  for (auto& e : events_)
    fn_(e.event, std::move(e.data));
  return ok;
}

namespace {

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size())
    return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i]))
        != std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
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

class http_transport : public mcp_transport {
public:
  http_transport(mcp_http_settings s, http_client& http)
    : s_(std::move(s)), http_(http) {
    for (auto& [k, v] : s_.headers)
      if (iequals(k, "mcp-protocol-version"))
        user_version_ = true;
  }

  ~http_transport() override { close(); }

  status start(handlers h, std::chrono::milliseconds timeout) override {
    h_ = std::move(h);
    if (!s_.sse)
      return {};
    // Legacy SSE: open the stream and wait for the `endpoint` event.
    http_request req;
    req.method = "GET";
    req.url = s_.url;
    req.headers = s_.headers;
    req.headers.emplace_back("Accept", "text/event-stream");
    req.connect_timeout = s_.connect_timeout;
    req.total_timeout = std::chrono::milliseconds{0};
    auto parser = std::make_shared<mcp_sse_stream>(
      s_.max_message_bytes,
      [this](const std::string& event, std::string data) {
        if (event == "endpoint") {
          std::lock_guard<std::mutex> guard{mtx_};
          endpoint_ = data.rfind("http", 0) == 0 ? data
                                                 : origin_of(s_.url) + data;
          cv_.notify_all();
        } else if (event.empty() || event == "message") {
          deliver(std::move(data));
        }
      });
    http_callbacks cb;
    cb.on_headers = [this](long status, const http_headers&) {
      if (status >= 400) {
        std::lock_guard<std::mutex> guard{mtx_};
        stream_error_ = "HTTP " + std::to_string(status);
      }
    };
    cb.on_data = [this, parser](std::string_view chunk) {
      return parser->feed(chunk);
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

  status send(const std::string& message) override {
    if (closing_)
      return status::failure(status_code::unavailable, "the server is closed");
    http_request req;
    req.method = "POST";
    req.headers = s_.headers;
    req.headers.emplace_back("Content-Type", "application/json");
    req.headers.emplace_back("Accept", "application/json, text/event-stream");
    {
      std::lock_guard<std::mutex> guard{mtx_};
      req.url = s_.sse ? endpoint_ : s_.url;
      if (!session_id_.empty())
        req.headers.emplace_back("Mcp-Session-Id", session_id_);
      if (!version_.empty() && !user_version_ && !s_.sse)
        req.headers.emplace_back("MCP-Protocol-Version", version_);
    }
    req.body = message;
    req.connect_timeout = s_.connect_timeout;
    req.total_timeout = std::chrono::milliseconds{0}; // the session times out
    struct state {
      long status = 0;
      bool sse = false;
      std::string body;
      std::unique_ptr<mcp_sse_stream> parser;
      bool too_big = false;
      bool replied = false; // a message arrived on this response's stream
    };
    auto st = std::make_shared<state>();
    auto self = this;
    http_callbacks cb;
    cb.on_headers = [self, st](long status, const http_headers& headers) {
      st->status = status;
      if (auto sid = find_header(headers, "mcp-session-id")) {
        std::lock_guard<std::mutex> guard{self->mtx_};
        self->session_id_ = *sid;
      }
      if (auto ct = find_header(headers, "content-type");
          ct != nullptr && ct->find("text/event-stream") != std::string::npos) {
        st->sse = true;
        auto* raw = st.get(); // the parser lives inside *st
        st->parser = std::make_unique<mcp_sse_stream>(
          self->s_.max_message_bytes,
          [self, raw](const std::string& event, std::string data) {
            if (event.empty() || event == "message") {
              raw->replied = true;
              self->deliver(std::move(data));
            }
          });
      }
    };
    cb.on_data = [self, st](std::string_view chunk) {
      if (st->sse)
        return st->parser->feed(chunk);
      st->body.append(chunk);
      if (st->body.size() > self->s_.max_message_bytes) {
        st->too_big = true;
        return false;
      }
      return true;
    };
    cb.on_done = [self, st, message](const http_response_summary& sum) {
      callback_guard last{self->pending_callbacks_};
      {
        std::lock_guard<std::mutex> guard{self->mtx_};
        self->inflight_.erase(sum.id);
      }
      if (self->closing_)
        return;
      std::string why;
      if (st->too_big)
        why = "the server sent a message larger than "
              + std::to_string(self->s_.max_message_bytes) + " bytes";
      else if (!sum.ok())
        why = sum.error;
      else if (st->status >= 400)
        why = "HTTP " + std::to_string(st->status)
              + (st->body.empty() ? "" : ": " + st->body.substr(0, 300));
      if (!why.empty()) {
        bool had_session;
        {
          std::lock_guard<std::mutex> guard{self->mtx_};
          had_session = !self->session_id_.empty();
        }
        // The connection is gone when the transfer broke (no response, or
        // a stream cut before its reply), when the server broke the size
        // limit, or when it no longer knows our session (404, or 400
        // naming the session, as after a restart): the session's calls
        // fail and the next call connects afresh.
        bool forgotten = had_session
                         && (st->status == 404
                             || (st->status == 400
                                 && st->body.find("ession")
                                      != std::string::npos));
        if (!sum.ok() && st->sse && st->replied)
          return; // the reply is in; how the stream ended does not matter
        if (!sum.ok() || st->too_big || forgotten) {
          self->closed(forgotten ? "the server no longer knows the session ("
                                     + why + ")"
                                 : why);
          return;
        }
        auto reply = error_reply_for(message, why);
        if (!reply.empty())
          self->deliver(std::move(reply));
        else
          MIBYAN_LOG(warning, "mcp", self->s_.server << ": " << why);
        return;
      }
      // Legacy SSE replies arrive on the stream; a POST answers "Accepted".
      if (!self->s_.sse && !st->sse && !st->body.empty()) {
        self->deliver(std::move(st->body));
      } else if (st->sse && !st->replied) {
        // A stream that ended without the reply would leave the call
        // waiting until its timeout.
        auto reply = error_reply_for(message, "the server ended the response "
                                              "stream without a reply");
        if (!reply.empty())
          self->deliver(std::move(reply));
      }
    };
    pending_callbacks_.fetch_add(1);
    auto id = http_.submit(std::move(req), std::move(cb));
    std::lock_guard<std::mutex> guard{mtx_};
    if (!closing_)
      inflight_.insert(id);
    return {};
  }

  void set_protocol_version(const std::string& v) override {
    std::lock_guard<std::mutex> guard{mtx_};
    version_ = v;
  }

  void close() override {
    if (closing_.exchange(true))
      return;
    std::set<http_request_id> ids;
    std::string sid, url;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      ids.swap(inflight_);
      sid = session_id_;
      url = s_.url;
    }
    for (auto id : ids)
      http_.cancel(id);
    if (stream_id_ != 0)
      http_.cancel(stream_id_);
    if (!s_.sse && !sid.empty()) {
      // End the session politely; bounded, best effort.
      http_request req;
      req.method = "DELETE";
      req.url = url;
      req.headers = s_.headers;
      req.headers.emplace_back("Mcp-Session-Id", sid);
      req.total_timeout = std::chrono::milliseconds{2000};
      req.connect_timeout = std::chrono::milliseconds{1000};
      http_.fetch(std::move(req));
    }
    // Every on_done (the stream's and the POSTs') captures `this`: wait
    // until each has returned (callback_guard), at most 5 s.
    for (int i = 0; i < 1000 && pending_callbacks_.load() > 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds{5});
  }

private:
  // Counts an on_done callback as running until it returns: the last thing
  // each one does is this decrement, so once pending_callbacks_ is 0 no
  // callback touches `this` any more (close() waits for that).
  struct callback_guard {
    std::atomic<int>& n;
    ~callback_guard() { n.fetch_sub(1); }
  };

  void deliver(std::string msg) {
    if (h_.on_message && !closing_)
      h_.on_message(std::move(msg));
  }
  void closed(const std::string& why) {
    if (closed_once_.exchange(true))
      return;
    if (h_.on_closed)
      h_.on_closed(why);
  }

  mcp_http_settings s_;
  http_client& http_;
  handlers h_;
  std::mutex mtx_;
  std::condition_variable cv_;
  std::string session_id_;
  std::string version_;
  bool user_version_ = false;
  std::string endpoint_;
  bool stream_done_ = false;
  std::string stream_error_;
  http_request_id stream_id_ = 0;
  std::set<http_request_id> inflight_;
  std::atomic<int> pending_callbacks_{0};
  std::atomic<bool> closing_{false};
  std::atomic<bool> closed_once_{false};
  bool started_ = false;
};

} // namespace

std::unique_ptr<mcp_transport> make_mcp_http_transport(mcp_http_settings s,
                                                       http_client& http) {
  return std::make_unique<http_transport>(std::move(s), http);
}

} // namespace mibyan
