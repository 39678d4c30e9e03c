// File: tests/support/sse_watcher.hpp
//
// A raw-socket watcher of `GET /ui/api/live` (docs/serve.md, "Operator
// console") for the operator-console suites: connects, sends the request,
// and parses the SSE frames ("event: NAME\ndata: JSON\n\n") as they come.
// Include after <boost/test/unit_test.hpp>.
#pragma once

#include <chrono>
#include <poll.h>
#include <string>
#include <sys/socket.h>
#include <unistd.h>
#include <vector>

#include "base/json.hpp"
#include "tests/support/loopback.hpp"
#include "tests/support/socket_read.hpp"

namespace mibyan::test {

struct sse_frame {
  std::string event;
  json::value data;
  std::string raw;
};

class sse_watcher {
public:
  /// Connects to 127.0.0.1:`port` and asks for `path`. With `rcvbuf` > 0
  /// the socket's receive buffer is set that small first (a watcher that
  /// stops reading then backs up at once).
  explicit sse_watcher(uint16_t port, int rcvbuf = 0,
                       const std::string& path = "/ui/api/live") {
    if (rcvbuf > 0) {
      fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
      ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(port);
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      BOOST_REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a)
                    == 0);
    } else {
      fd_ = dial_loopback(port);
    }
    send_all(fd_, "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1:"
                    + std::to_string(port) + "\r\n\r\n");
  }
  ~sse_watcher() { close(); }
  sse_watcher(const sse_watcher&) = delete;
  sse_watcher& operator=(const sse_watcher&) = delete;

  void close() {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = -1;
  }

  /// Reads until a frame satisfying `pred` arrived (true) or `seconds_`
  /// passed / the server closed (false). Every frame read is kept.
  template <class Pred>
  bool read_until(Pred pred, int seconds_ = 60) {
    for (size_t i = checked_; i < frames.size(); ++i)
      if (pred(frames[i])) {
        checked_ = i + 1;
        return true;
      }
    checked_ = frames.size();
    auto deadline = std::chrono::steady_clock::now()
                    + std::chrono::seconds{seconds_};
    while (std::chrono::steady_clock::now() < deadline && fd_ >= 0) {
      auto before = raw.size();
      if (!recv_some(fd_, raw))
        return false;
      if (raw.size() == before)
        continue;
      parse();
      for (; checked_ < frames.size(); ++checked_)
        if (pred(frames[checked_])) {
          ++checked_;
          return true;
        }
    }
    return false;
  }

  /// Reads until the raw stream contains `needle` (true) or `seconds_`
  /// passed / the server closed (false).
  bool wait_raw(const std::string& needle, int seconds_ = 60) {
    auto deadline = std::chrono::steady_clock::now()
                    + std::chrono::seconds{seconds_};
    while (raw.find(needle) == std::string::npos) {
      if (std::chrono::steady_clock::now() >= deadline || fd_ < 0)
        return false;
      auto before = raw.size();
      if (!recv_some(fd_, raw))
        return false;
      if (raw.size() != before)
        parse();
    }
    return true;
  }

  /// Reads until an event `name` (with session `sid` when given).
  bool wait_event(const std::string& name, const std::string& sid = {},
                  int seconds_ = 60) {
    return read_until(
      [&](const sse_frame& f) {
        return f.event == name
               && (sid.empty()
                   || (f.data.is_object()
                       && f.data.get_string("session_id", "") == sid));
      },
      seconds_);
  }

  /// The frames of `sid` (and the ones without a session: snapshot,
  /// lagged), in arrival order.
  std::vector<sse_frame> of(const std::string& sid) const {
    std::vector<sse_frame> out;
    for (auto& f : frames)
      if (f.data.is_object() && f.data.get_string("session_id", "") == sid)
        out.push_back(f);
    return out;
  }

  std::vector<sse_frame> frames;
  std::string raw;
  int fd() const { return fd_; }

private:
  // Splits the body (after the head, de-chunked loosely: chunk-size lines
  // are skipped as they are not "event:"/"data:" lines) into frames.
  void parse() {
    if (!head_done_) {
      auto p = raw.find("\r\n\r\n");
      if (p == std::string::npos)
        return;
      head = raw.substr(0, p);
      pos_ = p + 4;
      head_done_ = true;
    }
    for (;;) {
      auto end = raw.find("\n\n", pos_);
      if (end == std::string::npos)
        return;
      auto block = raw.substr(pos_, end - pos_);
      pos_ = end + 2;
      sse_frame f;
      size_t i = 0;
      while (i < block.size()) {
        auto nl = block.find('\n', i);
        auto line = block.substr(i, nl == std::string::npos ? std::string::npos
                                                             : nl - i);
        if (!line.empty() && line.back() == '\r')
          line.pop_back();
        if (line.rfind("event: ", 0) == 0)
          f.event = line.substr(7);
        else if (line.rfind("data: ", 0) == 0)
          f.raw = line.substr(6);
        if (nl == std::string::npos)
          break;
        i = nl + 1;
      }
      if (f.event.empty())
        continue; // a keep-alive comment
      auto parsed = json::parse(f.raw);
      if (parsed)
        f.data = *parsed.v;
      frames.push_back(std::move(f));
    }
  }

public:
  std::string head;

private:
  int fd_ = -1;
  bool head_done_ = false;
  size_t pos_ = 0;
  size_t checked_ = 0;
};

} // namespace mibyan::test
