// The MCP client's HTTP transport, part: resuming a stream and
// reconnecting (with the server's `retry` or a backoff) on the worker
// thread, the GET stream for server messages, and the legacy SSE start
// (open the stream, wait for its `endpoint` event). The class is declared
// in tools/mcp/mcp_http_transport.hpp.
#include "tools/mcp/mcp_http_transport.hpp"

#include "base/json.hpp"
#include "base/log.hpp"

namespace mibyan::mcp_http_detail {

namespace {

// scheme://authority of `url`.
std::string origin_of(const std::string& url) {
  auto scheme = url.find("://");
  if (scheme == std::string::npos)
    return url;
  auto slash = url.find('/', scheme + 3);
  return slash == std::string::npos ? url : url.substr(0, slash);
}

} // namespace

milliseconds http_transport::delay_for(const exchange& x) const {
  if (x.retry_ms >= 0)
    return milliseconds{x.retry_ms};
  auto d = s_.reconnect_delay;
  for (int i = 1; i < x.failures && d < s_.reconnect_max_delay; ++i)
    d *= 2;
  return std::min(d, s_.reconnect_max_delay);
}

void http_transport::reconnect(std::shared_ptr<exchange> x, const std::string& why) {
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

void http_transport::start_listening() {
  if (listening_.exchange(true))
    return;
  auto x = std::make_shared<exchange>();
  x->listen = true;
  post_task(milliseconds{0}, [this, x] { submit_get(x); });
}

void http_transport::post_task(milliseconds delay, std::function<void()> fn) {
  std::lock_guard<std::mutex> guard{wmtx_};
  if (wstop_)
    return;
  tasks_.emplace(clock::now() + delay, std::move(fn));
  if (!worker_.joinable())
    worker_ = std::thread([this] { work(); });
  wcv_.notify_all();
}

void http_transport::work() {
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

void http_transport::stop_worker() {
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

status http_transport::start_legacy(milliseconds timeout) {
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

} // namespace mibyan::mcp_http_detail
