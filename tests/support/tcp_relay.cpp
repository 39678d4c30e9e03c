// The test TCP relay (tests/support/tcp_relay.hpp).
#include "tests/support/tcp_relay.hpp"

#include <atomic>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace mibyan::test {

namespace {

int listen_loopback(uint16_t& port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    throw std::runtime_error("relay: socket");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0
      || ::listen(fd, 64) != 0
      || ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    throw std::runtime_error("relay: bind/listen");
  port = ntohs(a.sin_port);
  return fd;
}

int connect_loopback(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd >= 0
      && ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0)
    return fd;
  if (fd >= 0)
    ::close(fd);
  return -1;
}

} // namespace

struct tcp_relay::impl {
  struct conn {
    int client = -1;
    int server = -1;
    std::string sent;
    bool ended = false;
  };

  uint16_t target = 0;
  uint16_t port = 0;
  int listener = -1;
  int wake[2] = {-1, -1};
  std::atomic<bool> stop{false};
  mutable std::mutex mtx;
  std::vector<conn> conns;
  std::thread thread;

  void end(conn& c) {
    if (c.client >= 0)
      ::close(c.client);
    if (c.server >= 0)
      ::close(c.server);
    c.client = c.server = -1;
    c.ended = true;
  }

  void run() {
    std::vector<char> buf(1 << 16);
    while (!stop) {
      std::vector<pollfd> fds{{listener, POLLIN, 0}, {wake[0], POLLIN, 0}};
      std::vector<std::pair<size_t, bool>> who; // conn, from client
      {
        std::lock_guard<std::mutex> g{mtx};
        for (size_t i = 0; i < conns.size(); ++i) {
          if (conns[i].ended)
            continue;
          fds.push_back({conns[i].client, POLLIN, 0});
          who.emplace_back(i, true);
          fds.push_back({conns[i].server, POLLIN, 0});
          who.emplace_back(i, false);
        }
      }
      if (::poll(fds.data(), fds.size(), 200) <= 0)
        continue;
      if (fds[1].revents != 0) {
        char c;
        (void) !::read(wake[0], &c, 1);
      }
      if (fds[0].revents & POLLIN) {
        int c = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
        if (c >= 0) {
          int s = connect_loopback(target);
          std::lock_guard<std::mutex> g{mtx};
          conn k;
          k.client = c;
          k.server = s;
          conns.push_back(std::move(k));
          if (s < 0)
            end(conns.back());
        }
      }
      std::lock_guard<std::mutex> g{mtx};
      for (size_t j = 2; j < fds.size(); ++j) {
        if (fds[j].revents == 0)
          continue;
        auto [i, from_client] = who[j - 2];
        auto& c = conns[i];
        if (c.ended)
          continue;
        int from = from_client ? c.client : c.server;
        int to = from_client ? c.server : c.client;
        auto got = ::recv(from, buf.data(), buf.size(), 0);
        if (got <= 0) {
          end(c);
          continue;
        }
        if (from_client)
          c.sent.append(buf.data(), static_cast<size_t>(got));
        size_t off = 0;
        while (off < static_cast<size_t>(got)) {
          auto w = ::send(to, buf.data() + off,
                          static_cast<size_t>(got) - off, MSG_NOSIGNAL);
          if (w <= 0)
            break;
          off += static_cast<size_t>(w);
        }
        if (off < static_cast<size_t>(got))
          end(c);
      }
    }
  }
};

tcp_relay::tcp_relay(uint16_t target_port) : p_(std::make_unique<impl>()) {
  p_->target = target_port;
  p_->listener = listen_loopback(p_->port);
  if (::pipe(p_->wake) != 0)
    throw std::runtime_error("relay: pipe");
  p_->thread = std::thread([this] { p_->run(); });
}

tcp_relay::~tcp_relay() {
  p_->stop = true;
  (void) !::write(p_->wake[1], "x", 1);
  p_->thread.join();
  for (auto& c : p_->conns)
    p_->end(c);
  ::close(p_->listener);
  ::close(p_->wake[0]);
  ::close(p_->wake[1]);
}

std::string tcp_relay::address() const {
  return "127.0.0.1:" + std::to_string(p_->port);
}

size_t tcp_relay::connections() const {
  std::lock_guard<std::mutex> g{p_->mtx};
  return p_->conns.size();
}

bool tcp_relay::ended(size_t i) const {
  std::lock_guard<std::mutex> g{p_->mtx};
  return i < p_->conns.size() && p_->conns[i].ended;
}

std::string tcp_relay::client_bytes(size_t i) const {
  std::lock_guard<std::mutex> g{p_->mtx};
  return i < p_->conns.size() ? p_->conns[i].sent : std::string{};
}

void tcp_relay::cut() {
  std::lock_guard<std::mutex> g{p_->mtx};
  for (auto& c : p_->conns)
    if (!c.ended) {
      ::shutdown(c.client, SHUT_RDWR);
      ::shutdown(c.server, SHUT_RDWR);
      p_->end(c);
    }
  (void) !::write(p_->wake[1], "x", 1);
}

} // namespace mibyan::test
