#include "tests/support/kernel_rpc_server.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

namespace mibyan::test {

fake_rpc_server::fake_rpc_server(std::string path, fake_rpc_options opts)
  : path_(std::move(path)), opts_(std::move(opts)) {
  if (::pipe2(stop_pipe_, O_CLOEXEC) != 0)
    throw std::runtime_error("pipe2 failed");
  listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (listen_fd_ < 0 || path_.size() >= sizeof(addr.sun_path))
    throw std::runtime_error("cannot create socket " + path_);
  std::memcpy(addr.sun_path, path_.c_str(), path_.size() + 1);
  ::unlink(path_.c_str());
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr))
        != 0
      || ::listen(listen_fd_, 64) != 0)
    throw std::runtime_error("cannot listen on " + path_);
  acceptor_ = std::thread([this] { accept_loop(); });
}

fake_rpc_server::~fake_rpc_server() {
  char c = 'x';
  (void) !::write(stop_pipe_[1], &c, 1);
  acceptor_.join();
  {
    std::lock_guard<std::mutex> guard{mtx_};
    for (int fd : conn_fds_)
      ::shutdown(fd, SHUT_RDWR);
  }
  for (auto& t : threads_)
    t.join();
  for (int fd : conn_fds_)
    ::close(fd);
  ::close(listen_fd_);
  ::close(stop_pipe_[0]);
  ::close(stop_pipe_[1]);
  ::unlink(path_.c_str());
}

std::vector<fake_rpc_request> fake_rpc_server::requests() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return requests_;
}

void fake_rpc_server::accept_loop() {
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {stop_pipe_[0], POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR)
        continue;
      return;
    }
    if (fds[1].revents != 0)
      return;
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0)
      continue;
    int index = ++connections_;
    std::lock_guard<std::mutex> guard{mtx_};
    conn_fds_.push_back(fd);
    threads_.emplace_back([this, fd, index] { serve(fd, index); });
  }
}

void fake_rpc_server::serve(int fd, int index) {
  std::string buf;
  char chunk[65536];
  for (;;) {
    pollfd fds[2] = {{fd, POLLIN, 0}, {stop_pipe_[0], POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR)
        continue;
      return;
    }
    if (fds[1].revents != 0)
      return;
    auto got = ::read(fd, chunk, sizeof(chunk));
    if (got <= 0)
      return;
    buf.append(chunk, static_cast<size_t>(got));
    size_t nl;
    while ((nl = buf.find('\n')) != std::string::npos) {
      fake_rpc_request req;
      req.connection = index;
      req.line = buf.substr(0, nl);
      buf.erase(0, nl + 1);
      auto parsed = json::parse(req.line);
      if (parsed.v)
        req.msg = std::move(*parsed.v);
      if (opts_.close_after_read) {
        {
          std::lock_guard<std::mutex> guard{mtx_};
          requests_.push_back(std::move(req));
        }
        ::shutdown(fd, SHUT_RDWR);
        return;
      }
      handle(fd, std::move(req));
      if (opts_.close_after_reply) {
        ::shutdown(fd, SHUT_RDWR);
        return;
      }
    }
  }
}

void fake_rpc_server::handle(int fd, fake_rpc_request req) {
  json::value reply = json::value::make_object();
  const json::value* id = req.msg.is_object() ? req.msg.find("id") : nullptr;
  reply["id"] = id != nullptr && id->is_string() ? *id : json::value{};
  std::string result;
  if (!req.msg.is_object()) {
    result = "{\"error\": \"Invalid RPC request: not JSON\"}";
  } else if (req.msg.get_string("token", "") != opts_.token
             || opts_.token.empty()) {
    result = "{\"error\": \"Unauthorized RPC request\"}";
  } else if (opts_.answer) {
    result = opts_.answer(req);
  } else {
    json::value echo = json::value::make_object();
    echo["tool"] = req.msg.get_string("tool", "");
    if (auto args = req.msg.find("args"))
      echo["args"] = *args;
    echo["connection"] = req.connection;
    result = echo.dump();
  }
  reply["result"] = result;
  auto line = reply.dump() + "\n";
  std::vector<std::pair<int, std::string>> flush;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    requests_.push_back(std::move(req));
    if (opts_.hold == 0) {
      flush.emplace_back(fd, std::move(line));
    } else {
      held_.emplace_back(fd, std::move(line));
      if (held_.size() >= opts_.hold) {
        flush.assign(held_.rbegin(), held_.rend());
        held_.clear();
      }
    }
  }
  for (auto& [out_fd, text] : flush)
    write_line(out_fd, text);
}

void fake_rpc_server::write_line(int fd, const std::string& line) {
  static std::mutex write_mtx;
  std::lock_guard<std::mutex> guard{write_mtx};
  size_t off = 0;
  while (off < line.size()) {
    auto n = ::send(fd, line.data() + off, line.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return;
    off += static_cast<size_t>(n);
  }
}

} // namespace mibyan::test
