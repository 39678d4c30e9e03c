// File: bench/scripted_provider.hpp
//
// An OpenAI-compatible provider stand-in for the benchmarks, run in the
// benchmark's own process: one epoll thread, HTTP/1.1 keep-alive on
// 127.0.0.1 (ephemeral port). It decides its reply by counting the tool
// messages in the request: fewer than the conversation's rounds (read from
// the prompt, "rounds=N") gives a tool call (read_file of the given file),
// otherwise an answer; streamed when the request asks for a stream. It
// times its own handling (request complete -> response written). With
// `hold(true)` it keeps requests unanswered until `hold(false)`, so many
// turns can be kept open at once. Also the plain keep-alive socket client
// used as the same-run baseline. Header-only: benchmarks are single
// translation units.
#pragma once

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/json.hpp"
#include "bench/bench_http.hpp"
#include "bench/bench_util.hpp"

namespace mibyan::bench {

[[noreturn]] inline void provider_die(const std::string& msg) {
  bench_die(msg);
}

inline size_t count_of(std::string_view hay, std::string_view needle) {
  size_t n = 0;
  for (auto pos = hay.find(needle); pos != std::string_view::npos;
       pos = hay.find(needle, pos + needle.size()))
    ++n;
  return n;
}

inline double ns_to_ms(uint64_t ns) {
  return static_cast<double>(ns) / 1e6;
}

inline uint64_t now_ns() {
  return static_cast<uint64_t>(
    std::chrono::duration_cast<std::chrono::nanoseconds>(
      clock_type::now().time_since_epoch())
      .count());
}

// -- scripted server ----------------------------------------------------------

inline std::string sse(const json::value& chunk) {
  return "data: " + chunk.dump() + "\n\n";
}

inline json::value choice_chunk(json::value delta, const std::string& finish) {
  json::value ch;
  ch["index"] = 0;
  ch["delta"] = std::move(delta);
  if (finish.empty())
    ch["finish_reason"] = json::value{};
  else
    ch["finish_reason"] = finish;
  json::value c;
  c["id"] = "chatcmpl-bench";
  c["object"] = "chat.completion.chunk";
  c["model"] = "m";
  c["choices"] = json::value::make_array();
  c["choices"].push_back(std::move(ch));
  return c;
}

inline std::string usage_chunk() {
  json::value c;
  c["id"] = "chatcmpl-bench";
  c["object"] = "chat.completion.chunk";
  c["model"] = "m";
  c["choices"] = json::value::make_array();
  c["usage"]["prompt_tokens"] = 10;
  c["usage"]["completion_tokens"] = 5;
  c["usage"]["total_tokens"] = 15;
  return sse(c);
}

// A streamed reply asking for read_file(path) with call id call_<k>.
inline std::string tool_call_stream(size_t k, const std::string& path) {
  json::value tc;
  tc["index"] = 0;
  tc["id"] = "call_" + std::to_string(k);
  tc["type"] = "function";
  tc["function"]["name"] = "read_file";
  json::value a;
  a["path"] = path;
  tc["function"]["arguments"] = a.dump();
  json::value d;
  d["role"] = "assistant";
  d["content"] = json::value{};
  d["tool_calls"] = json::value::make_array();
  d["tool_calls"].push_back(std::move(tc));
  return sse(choice_chunk(std::move(d), ""))
         + sse(choice_chunk(json::value::make_object(), "tool_calls"))
         + usage_chunk() + "data: [DONE]\n\n";
}

inline std::string answer_stream() {
  json::value d;
  d["role"] = "assistant";
  d["content"] = "All files read.";
  return sse(choice_chunk(std::move(d), ""))
         + sse(choice_chunk(json::value::make_object(), "stop"))
         + usage_chunk() + "data: [DONE]\n\n";
}

// The same replies as whole (non-streamed) Chat Completions bodies.
inline std::string completion(size_t k, const std::string& path, bool answer) {
  json::value msg;
  msg["role"] = "assistant";
  if (answer) {
    msg["content"] = "All files read.";
  } else {
    msg["content"] = json::value{};
    json::value tc;
    tc["id"] = "call_" + std::to_string(k);
    tc["type"] = "function";
    tc["function"]["name"] = "read_file";
    json::value a;
    a["path"] = path;
    tc["function"]["arguments"] = a.dump();
    msg["tool_calls"] = json::value::make_array();
    msg["tool_calls"].push_back(std::move(tc));
  }
  json::value choice;
  choice["index"] = 0;
  choice["message"] = std::move(msg);
  choice["finish_reason"] = answer ? "stop" : "tool_calls";
  json::value body;
  body["id"] = "chatcmpl-bench";
  body["object"] = "chat.completion";
  body["model"] = "m";
  body["choices"] = json::value::make_array();
  body["choices"].push_back(std::move(choice));
  body["usage"]["prompt_tokens"] = 10;
  body["usage"]["completion_tokens"] = 5;
  body["usage"]["total_tokens"] = 15;
  return body.dump();
}

inline std::string http_response(const std::string& body, bool stream = true) {
  return std::string{"HTTP/1.1 200 OK\r\nContent-Type: "}
         + (stream ? "text/event-stream" : "application/json") + "\r\n"
         "Content-Length: "
         + std::to_string(body.size()) + "\r\n\r\n" + body;
}

class scripted_server {
public:
  explicit scripted_server(std::string file) : file_(std::move(file)) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                          0);
    int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr)
          != 0
        || ::listen(listen_fd_, 4096) != 0)
      provider_die("scripted server: bind/listen failed");
    socklen_t len = sizeof addr;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    ep_ = ::epoll_create1(EPOLL_CLOEXEC);
    wake_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    add_fd(listen_fd_, EPOLLIN);
    add_fd(wake_, EPOLLIN);
    for (size_t k = 0; k < 64; ++k) {
      tool_replies_.push_back(http_response(tool_call_stream(k, file_)));
      tool_json_.push_back(http_response(completion(k, file_, false),
                                         false));
    }
    answer_reply_ = http_response(answer_stream());
    answer_json_ = http_response(completion(0, file_, true), false);
    thread_ = std::thread([this] { loop(); });
  }

  ~scripted_server() {
    stop_ = true;
    uint64_t one = 1;
    auto r = ::write(wake_, &one, sizeof one);
    (void) r;
    thread_.join();
    for (auto& [fd, c] : conns_)
      ::close(fd);
    ::close(listen_fd_);
    ::close(wake_);
    ::close(ep_);
  }

  int port() const { return port_; }

  std::string url() const {
    return "http://127.0.0.1:" + std::to_string(port_) + "/v1";
  }

  // Counters (reset between phases).
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> handling_ns{0};
  std::atomic<int64_t> in_flight{0};
  std::atomic<int64_t> max_in_flight{0};
  std::atomic<uint64_t> connections{0};
  /// A request body recorded when `record_at` tool messages were in it.
  std::atomic<int> record_at{-1};
  std::mutex recorded_mtx;
  std::string recorded;

  /// Requests kept unanswered while holding.
  std::atomic<size_t> held{0};

  /// Holds requests (true) or answers the held ones and stops holding.
  void hold(bool on) {
    holding_ = on;
    if (!on) {
      uint64_t one = 1;
      auto r = ::write(wake_, &one, sizeof one);
      (void) r;
    }
  }

  void reset() {
    requests = 0;
    handling_ns = 0;
    in_flight = 0;
    max_in_flight = 0;
    connections = 0;
  }

private:
  struct conn {
    std::string in;
    std::string out;
    size_t out_off = 0;
  };

  void add_fd(int fd, uint32_t events) {
    epoll_event ev{};
    ev.events = events;
    ev.data.fd = fd;
    ::epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &ev);
  }

  void loop() {
    std::vector<epoll_event> evs(256);
    while (!stop_) {
      int n = ::epoll_wait(ep_, evs.data(), static_cast<int>(evs.size()), -1);
      for (int i = 0; i < n; ++i) {
        int fd = evs[i].data.fd;
        if (fd == wake_) {
          uint64_t v;
          auto r = ::read(wake_, &v, sizeof v);
          (void) r;
          if (!holding_)
            release_held();
          continue;
        }
        if (fd == listen_fd_) {
          accept_all();
          continue;
        }
        if (evs[i].events & (EPOLLERR | EPOLLHUP)) {
          drop(fd);
          continue;
        }
        if (evs[i].events & EPOLLOUT)
          flush(fd);
        if (evs[i].events & EPOLLIN)
          on_readable(fd);
      }
    }
  }

  void accept_all() {
    for (;;) {
      int fd = ::accept4(listen_fd_, nullptr, nullptr,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0)
        return;
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      conns_[fd];
      ++connections;
      add_fd(fd, EPOLLIN);
    }
  }

  void drop(int fd) {
    ::epoll_ctl(ep_, EPOLL_CTL_DEL, fd, nullptr);
    ::close(fd);
    conns_.erase(fd);
  }

  void on_readable(int fd) {
    auto it = conns_.find(fd);
    if (it == conns_.end())
      return;
    auto& c = it->second;
    char buf[65536];
    for (;;) {
      auto got = ::read(fd, buf, sizeof buf);
      if (got > 0) {
        c.in.append(buf, static_cast<size_t>(got));
        continue;
      }
      if (got == 0) {
        drop(fd);
        return;
      }
      if (errno == EAGAIN || errno == EWOULDBLOCK)
        break;
      drop(fd);
      return;
    }
    // Handle every complete request in the buffer.
    for (;;) {
      auto head_end = c.in.find("\r\n\r\n");
      if (head_end == std::string::npos)
        return;
      size_t clen = 0;
      std::string_view head{c.in.data(), head_end};
      for (size_t pos = 0; pos < head.size();) {
        auto eol = head.find("\r\n", pos);
        auto line = head.substr(pos, eol == std::string_view::npos
                                       ? std::string_view::npos
                                       : eol - pos);
        if (line.size() > 15
            && strncasecmp(line.data(), "content-length:", 15) == 0)
          clen = std::strtoul(std::string{line.substr(15)}.c_str(), nullptr,
                              10);
        if (eol == std::string_view::npos)
          break;
        pos = eol + 2;
      }
      auto total = head_end + 4 + clen;
      if (c.in.size() < total)
        return;
      auto start = now_ns();
      std::string_view body{c.in.data() + head_end + 4, clen};
      if (holding_) {
        held_.emplace_back(fd, std::string{body});
        ++held;
        c.in.erase(0, total);
        continue;
      }
      respond(c, body);
      c.in.erase(0, total);
      flush(fd, start);
      if (conns_.find(fd) == conns_.end())
        return;
    }
  }

  void release_held() {
    auto list = std::move(held_);
    held_.clear();
    held = 0;
    for (auto& [fd, body] : list) {
      auto it = conns_.find(fd);
      if (it == conns_.end())
        continue;
      auto start = now_ns();
      respond(it->second, body);
      flush(fd, start);
    }
  }

  void respond(conn& c, std::string_view body) {
    size_t rounds = 0;
    auto r = body.find("rounds=");
    if (r != std::string_view::npos)
      rounds = std::strtoul(std::string{body.substr(r + 7, 8)}.c_str(),
                            nullptr, 10);
    size_t k = count_of(body, "\"role\":\"tool\"");
    if (static_cast<int>(k) == record_at.load()) {
      std::lock_guard<std::mutex> g{recorded_mtx};
      if (recorded.empty())
        recorded.assign(body.data(), body.size());
    }
    if (k == 0) {
      auto now = ++in_flight;
      auto prev = max_in_flight.load();
      while (now > prev && !max_in_flight.compare_exchange_weak(prev, now))
        ;
    }
    bool stream = body.find("\"stream\":true") != std::string_view::npos;
    if (k < rounds && k < tool_replies_.size()) {
      c.out.append(stream ? tool_replies_[k] : tool_json_[k]);
    } else {
      --in_flight;
      c.out.append(stream ? answer_reply_ : answer_json_);
    }
  }

  void flush(int fd, uint64_t start = 0) {
    auto it = conns_.find(fd);
    if (it == conns_.end())
      return;
    auto& c = it->second;
    while (c.out_off < c.out.size()) {
      auto w = ::send(fd, c.out.data() + c.out_off, c.out.size() - c.out_off,
                      MSG_NOSIGNAL);
      if (w > 0) {
        c.out_off += static_cast<size_t>(w);
        continue;
      }
      if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        epoll_event ev{};
        ev.events = EPOLLIN | EPOLLOUT;
        ev.data.fd = fd;
        ::epoll_ctl(ep_, EPOLL_CTL_MOD, fd, &ev);
        break;
      }
      drop(fd);
      return;
    }
    if (c.out_off == c.out.size()) {
      c.out.clear();
      c.out_off = 0;
    }
    if (start != 0) {
      handling_ns += now_ns() - start;
      ++requests;
    }
  }

  std::string file_;
  int listen_fd_ = -1;
  int ep_ = -1;
  int wake_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<bool> holding_{false};
  std::vector<std::pair<int, std::string>> held_;
  std::vector<std::string> tool_replies_; // streamed, by round
  std::vector<std::string> tool_json_;    // whole bodies, by round
  std::string answer_reply_;
  std::string answer_json_;
  std::unordered_map<int, conn> conns_;
  std::thread thread_;
};

// -- plain client (baseline) --------------------------------------------------

// Sends `body` as a chat request `n` times over one keep-alive connection
// and returns the round-trip times in milliseconds.
inline std::vector<double> plain_round_trips(int port, const std::string& body,
                                      int n) {
  int fd = connect_loopback(static_cast<uint16_t>(port));
  auto req = "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
             "Content-Type: application/json\r\nAccept: text/event-stream\r\n"
             "Authorization: Bearer sk-bench\r\nContent-Length: "
             + std::to_string(body.size()) + "\r\n\r\n" + body;
  std::vector<double> out;
  std::string in;
  for (int i = 0; i < n; ++i) {
    auto start = clock_type::now();
    round_trip(fd, req, in);
    out.push_back(ms_since(start));
  }
  ::close(fd);
  return out;
}

} // namespace mibyan::bench
