// Raw loopback TCP helpers for tests (tests/support/loopback.hpp).
#include "tests/support/loopback.hpp"

#include <chrono>

#include <arpa/inet.h>
#include <poll.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <boost/test/unit_test.hpp>

namespace mibyan::test {

int dial_loopback(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  BOOST_REQUIRE(fd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  BOOST_REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a)
                == 0);
  return fd;
}

void send_all(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    auto n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n <= 0)
      return;
    off += static_cast<size_t>(n);
  }
}

uint16_t port_of(const std::string& address) {
  return static_cast<uint16_t>(
    std::stoi(address.substr(address.rfind(':') + 1)));
}

std::string exchange_http(const std::string& address,
                          const std::string& request) {
  int fd = dial_loopback(port_of(address));
  send_all(fd, request);
  std::string out;
  char buf[4096];
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{120};
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0)
      continue;
    auto got = ::recv(fd, buf, sizeof buf, 0);
    if (got <= 0)
      break;
    out.append(buf, static_cast<size_t>(got));
  }
  ::close(fd);
  return out;
}

} // namespace mibyan::test
