// File: bench/bench_http.hpp
//
// A minimal blocking HTTP/1.1 client for the benchmarks that drive a server
// on 127.0.0.1 (serve, metrics, live, ui and the scripted provider's plain
// baseline): a keep-alive connection and one request/response with a
// Content-Length reply. Every failure ends the benchmark (bench_die): a
// benchmark whose client breaks measures nothing. Header-only.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

namespace mibyan::bench {

/// Ends the benchmark with "bench: `msg`" on stderr and exit status 1.
[[noreturn]] inline void bench_die(const std::string& msg) {
  std::fprintf(stderr, "bench: %s\n", msg.c_str());
  std::exit(1);
}

/// A TCP connection to 127.0.0.1:`port` with TCP_NODELAY; the caller
/// closes it.
inline int connect_loopback(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
    bench_die("connect to 127.0.0.1:" + std::to_string(port) + " failed");
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

/// Writes all of `s` to `fd`.
inline void send_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    auto w = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (w <= 0)
      bench_die("send failed");
    off += static_cast<size_t>(w);
  }
}

/// Reads one reply with a Content-Length body from `fd` into `in` (head
/// and body). Returns true when its status is 200.
inline bool read_reply(int fd, std::string& in) {
  in.clear();
  size_t need = std::string::npos;
  char buf[65536];
  while (need == std::string::npos || in.size() < need) {
    auto got = ::read(fd, buf, sizeof buf);
    if (got <= 0)
      bench_die("the server closed the connection");
    in.append(buf, static_cast<size_t>(got));
    if (need == std::string::npos) {
      auto he = in.find("\r\n\r\n");
      if (he == std::string::npos)
        continue;
      auto cl = in.find("Content-Length: ");
      if (cl == std::string::npos || cl > he)
        bench_die("a reply without Content-Length: " + in.substr(0, 300));
      need = he + 4 + std::strtoul(in.c_str() + cl + 16, nullptr, 10);
    }
  }
  return in.compare(0, 12, "HTTP/1.1 200") == 0;
}

/// One request/response on keep-alive connection `fd`: sends `req`, reads
/// the reply into `in`; true when its status is 200.
inline bool round_trip(int fd, const std::string& req, std::string& in) {
  send_all(fd, req);
  return read_reply(fd, in);
}

/// The body of reply `in` (after the head; "" when there is none).
inline std::string reply_body(const std::string& in) {
  auto he = in.find("\r\n\r\n");
  return he == std::string::npos ? std::string{} : in.substr(he + 4);
}

} // namespace mibyan::bench
