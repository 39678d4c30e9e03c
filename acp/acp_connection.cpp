#include "acp/acp_connection.hpp"

#include <cerrno>
#include <cstring>

#include <poll.h>
#include <unistd.h>

#include "base/bounded_line_reader.hpp"
#include "base/log.hpp"
#include "tools/mcp/mcp_message.hpp"

namespace mibyan {

namespace {

json::value envelope() {
  json::value m;
  m["jsonrpc"] = "2.0";
  return m;
}

// "MCP error CODE: text" (tools/mcp/mcp_message) as the client's error.
std::string client_error_text(const std::string& e) {
  static const std::string prefix = "MCP error ";
  if (e.rfind(prefix, 0) == 0)
    return "client error " + e.substr(prefix.size());
  return e;
}

} // namespace

acp_connection::acp_connection(int in_fd, int out_fd, size_t max_line,
                               size_t max_queued)
  : in_fd_(in_fd), out_fd_(out_fd), max_line_(max_line),
    max_queued_(max_queued) {}

acp_connection::~acp_connection() {
  close();
  join();
}

void acp_connection::start(handlers h) {
  h_ = std::move(h);
  writer_ = std::thread([this] { write_loop(); });
  reader_ = std::thread([this] { read_loop(); });
}

void acp_connection::send_line(std::string line) {
  line += '\n';
  std::lock_guard<std::mutex> guard{out_mtx_};
  if (writer_stop_)
    return;
  if (out_bytes_ + line.size() > max_queued_) {
    MIBYAN_LOG(error, "acp", "the client does not read its input ("
                               << out_bytes_ << " bytes queued); closing");
    writer_stop_ = true;
    closed_ = true;
    out_cv_.notify_all();
    req_cv_.notify_all();
    return;
  }
  out_bytes_ += line.size();
  out_.push_back(std::move(line));
  out_cv_.notify_one();
}

void acp_connection::write_loop() {
  for (;;) {
    std::string line;
    {
      std::unique_lock<std::mutex> lock{out_mtx_};
      out_cv_.wait(lock, [&] { return !out_.empty() || writer_stop_; });
      if (out_.empty())
        return;
      line = std::move(out_.front());
      out_.pop_front();
      out_bytes_ -= line.size();
    }
    size_t off = 0;
    while (off < line.size()) {
      auto n = ::write(out_fd_, line.data() + off, line.size() - off);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0) {
        MIBYAN_LOG(warning, "acp", "cannot write to the client: "
                                     << std::strerror(errno));
        std::lock_guard<std::mutex> guard{out_mtx_};
        out_.clear();
        out_bytes_ = 0;
        writer_stop_ = true;
        closed_ = true;
        req_cv_.notify_all();
        return;
      }
      off += static_cast<size_t>(n);
    }
  }
}

void acp_connection::reply(const json::value& id, json::value result) {
  auto m = envelope();
  m["id"] = id;
  m["result"] = std::move(result);
  send_line(m.dump());
}

void acp_connection::reply_error(const json::value& id, int code,
                                 const std::string& message) {
  auto m = envelope();
  m["id"] = id;
  json::value e;
  e["code"] = code;
  e["message"] = message;
  m["error"] = std::move(e);
  send_line(m.dump());
}

void acp_connection::notify(const std::string& method, json::value params) {
  auto m = envelope();
  m["method"] = method;
  m["params"] = std::move(params);
  send_line(m.dump());
}

result<json::value>
acp_connection::request(const std::string& method, json::value params,
                        std::chrono::milliseconds timeout,
                        const std::function<bool()>& stop) {
  auto w = std::make_shared<waiter>();
  int64_t id = 0;
  {
    std::lock_guard<std::mutex> guard{req_mtx_};
    if (closed_)
      return result<json::value>::failure(status_code::unavailable,
                                          "the client is disconnected");
    id = ++next_id_;
    waiting_[id] = w;
  }
  auto m = envelope();
  m["id"] = id;
  m["method"] = method;
  m["params"] = std::move(params);
  send_line(m.dump());
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::unique_lock<std::mutex> lock{req_mtx_};
  status_code why = status_code::ok;
  while (!w->done) {
    if (closed_) {
      why = status_code::unavailable;
      break;
    }
    if (stop && stop()) {
      why = status_code::cancelled;
      break;
    }
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      why = status_code::timeout;
      break;
    }
    // Short slices: the cancel flag is polled (nobody notifies for it).
    req_cv_.wait_for(lock, std::min<std::chrono::steady_clock::duration>(
                             deadline - now, std::chrono::milliseconds(50)));
  }
  waiting_.erase(id);
  if (w->done) {
    if (w->ok)
      return std::move(w->result);
    return result<json::value>::failure(status_code::internal,
                                        client_error_text(w->error));
  }
  lock.unlock();
  if (why != status_code::unavailable) {
    json::value c;
    c["requestId"] = id;
    notify("$/cancel_request", std::move(c));
  }
  switch (why) {
    case status_code::cancelled:
      return result<json::value>::failure(why, method + " was cancelled");
    case status_code::timeout:
      return result<json::value>::failure(
        why, "the client did not answer " + method + " in "
               + std::to_string(timeout.count() / 1000) + " s");
    default:
      return result<json::value>::failure(status_code::unavailable,
                                          "the client is disconnected");
  }
}

void acp_connection::close() {
  closed_ = true;
  {
    std::lock_guard<std::mutex> guard{out_mtx_};
    writer_stop_ = true;
    out_cv_.notify_all();
  }
  std::lock_guard<std::mutex> guard{req_mtx_};
  req_cv_.notify_all();
}

void acp_connection::join() {
  if (reader_.joinable() && reader_.get_id() != std::this_thread::get_id())
    reader_.join();
  if (writer_.joinable() && writer_.get_id() != std::this_thread::get_id())
    writer_.join();
}

void acp_connection::handle_line(const std::string& raw) {
  std::string_view line{raw};
  if (!line.empty() && line.back() == '\r')
    line.remove_suffix(1);
  if (line.find_first_not_of(" \t") == std::string_view::npos)
    return;
  auto parsed = json::parse(line);
  if (!parsed) {
    ++bad_lines_;
    MIBYAN_LOG(warning, "acp", "a line that is no JSON: " << parsed.error);
    reply_error(json::value{}, acp_error::parse_error,
                "Parse error: " + parsed.error);
    return;
  }
  if (parsed.v->is_array()) {
    ++bad_lines_;
    reply_error(json::value{}, acp_error::invalid_request,
                "Invalid request: batches are not supported");
    return;
  }
  auto in = classify_mcp_message(*parsed.v);
  switch (in.k) {
    case mcp_incoming::kind::invalid: {
      ++bad_lines_;
      json::value id;
      if (parsed.v->is_object())
        if (auto i = parsed.v->find("id");
            i != nullptr && (i->is_string() || i->is_int()))
          id = *i;
      // A message with a method of the wrong type, or a reply whose id is
      // not one of ours: answered only when it looks like a request.
      if (parsed.v->is_object() && parsed.v->find("method") != nullptr)
        reply_error(id, acp_error::invalid_request,
                    "Invalid request: " + in.error);
      else if (!parsed.v->is_object())
        reply_error(id, acp_error::invalid_request,
                    "Invalid request: " + in.error);
      else
        MIBYAN_LOG(warning, "acp", "ignored an invalid message: " << in.error);
      return;
    }
    case mcp_incoming::kind::request:
      if (!in.id.is_string() && !in.id.is_int()) {
        ++bad_lines_;
        reply_error(json::value{}, acp_error::invalid_request,
                    "Invalid request: the id must be a string or an integer");
        return;
      }
      if (h_.on_request)
        h_.on_request(in.id, in.method, in.params);
      return;
    case mcp_incoming::kind::notification: {
      auto p = parsed.v->find("params");
      if (h_.on_notification)
        h_.on_notification(in.method, p != nullptr && p->is_object()
                                        ? *p
                                        : json::value::make_object());
      return;
    }
    case mcp_incoming::kind::reply: {
      std::lock_guard<std::mutex> guard{req_mtx_};
      auto it = waiting_.find(in.id.as_int());
      if (it == waiting_.end()) {
        ++unknown_replies_;
        MIBYAN_LOG(warning, "acp", "a reply to no request of ours (id "
                                     << in.id.dump() << "); ignored");
        return;
      }
      auto& w = *it->second;
      w.done = true;
      w.ok = in.ok;
      w.result = std::move(in.result);
      w.error = std::move(in.error);
      req_cv_.notify_all();
      return;
    }
  }
}

void acp_connection::read_loop() {
  bounded_line_reader lines{in_fd_, max_line_};
  std::string line;
  uint64_t length = 0;
  for (;;) {
    auto st = lines.next(line, length);
    if (st == bounded_line_reader::status::eof)
      break;
    if (st == bounded_line_reader::status::too_long) {
      ++bad_lines_;
      MIBYAN_LOG(warning, "acp", "a message of " << length
                                   << " bytes, over the limit of "
                                   << max_line_ << "; discarded");
      reply_error(json::value{}, acp_error::invalid_request,
                  "Invalid request: a message of " + std::to_string(length)
                    + " bytes is over the limit of "
                    + std::to_string(max_line_) + " bytes");
      continue;
    }
    try {
      handle_line(line);
    } catch (const std::exception& e) {
      MIBYAN_LOG(error, "acp", "handling a message failed: " << e.what());
    }
  }
  MIBYAN_LOG(info, "acp", "the client closed the connection");
  {
    std::lock_guard<std::mutex> guard{req_mtx_};
    closed_ = true;
    req_cv_.notify_all();
  }
  if (h_.on_closed)
    h_.on_closed();
}

} // namespace mibyan
