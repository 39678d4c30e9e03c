// File: tests/support/socket_read.hpp
//
// Reading a raw HTTP response or event stream from a test's socket without
// blocking past a deadline: one bounded read, and "read until a needle
// arrives or the server closes". Header-only; no Boost.Test dependency.
#pragma once

#include <chrono>
#include <string>

#include <poll.h>
#include <sys/socket.h>

namespace mibyan::test {

/// Waits up to 100 ms for data on `fd` and appends what one recv() gives
/// to `out`. Returns false once the peer has closed (or the read failed),
/// true otherwise (also when nothing arrived yet).
inline bool recv_some(int fd, std::string& out) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, 100) <= 0)
    return true;
  char buf[16384];
  auto n = ::recv(fd, buf, sizeof buf, 0);
  if (n <= 0)
    return false;
  out.append(buf, static_cast<size_t>(n));
  return true;
}

/// Reads from `fd` into `got` until `got` contains `needle` (true), or the
/// peer closes or `seconds_` pass (false). With an empty `needle` it reads
/// until the peer closes or the time is up, and returns whether it closed.
inline bool read_until(int fd, std::string& got, const std::string& needle,
                       int seconds_) {
  auto deadline = std::chrono::steady_clock::now()
                  + std::chrono::seconds{seconds_};
  while (needle.empty() || got.find(needle) == std::string::npos) {
    if (std::chrono::steady_clock::now() >= deadline)
      return false;
    if (!recv_some(fd, got))
      return needle.empty();
  }
  return true;
}

} // namespace mibyan::test
