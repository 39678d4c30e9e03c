#include "tests/support/paths.hpp"
#include "tests/support/http_server.hpp"

#include "base/json.hpp"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <stdexcept>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

namespace mibyan::test {

namespace {

std::string script_path() {
  return test_source_dir() + "/support/http_server.py";
}

} // namespace

http_server::http_server() {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0)
    throw std::runtime_error("http_server: pipe failed");
  auto parent = ::getpid();
  pid_ = ::fork();
  if (pid_ < 0) {
    ::close(out[0]);
    ::close(out[1]);
    throw std::runtime_error("http_server: fork failed");
  }
  if (pid_ == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent)
      ::_exit(1);
    ::dup2(out[1], 1);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0)
      ::dup2(devnull, 0);
    auto script = script_path();
    ::execlp("python3", "python3", "-u", script.c_str(),
             static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(out[1]);
  std::string line;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  char c = 0;
  while (line.find('\n') == std::string::npos) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                  deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0)
      break;
    pollfd pfd{out[0], POLLIN, 0};
    int rc = ::poll(&pfd, 1, static_cast<int>(left));
    if (rc < 0 && errno == EINTR)
      continue;
    if (rc <= 0)
      break;
    auto n = ::read(out[0], &c, 1);
    if (n <= 0)
      break;
    line += c;
  }
  ::close(out[0]);
  port_ = static_cast<uint16_t>(std::atoi(line.c_str()));
  if (port_ == 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
    throw std::runtime_error("http_server: no port from " + script_path()
                             + " (got '" + line + "')");
  }
}

http_server::~http_server() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

std::string http_server::url(std::string_view path) const {
  return "http://127.0.0.1:" + std::to_string(port_) + std::string{path};
}

std::string http_server::control(const std::string& method,
                                 const std::string& path,
                                 const std::string& body) const {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return {};
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port_);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return {};
  }
  std::string req = method + " " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n"
                    + "Content-Length: " + std::to_string(body.size())
                    + "\r\nConnection: close\r\n\r\n" + body;
  size_t sent = 0;
  while (sent < req.size()) {
    auto n = ::send(fd, req.data() + sent, req.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) {
      ::close(fd);
      return {};
    }
    sent += static_cast<size_t>(n);
  }
  std::string resp;
  char buf[65536];
  for (;;) {
    auto n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0)
      break;
    resp.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  auto sep = resp.find("\r\n\r\n");
  return sep == std::string::npos ? std::string{} : resp.substr(sep + 4);
}

void http_server::script(const std::string& spec_json) const {
  control("POST", "/__script", spec_json);
}

void http_server::script_chat(const std::string& body, int times,
                              int delay_ms) const {
  json::value s;
  s["path"] = "/v1/chat/completions";
  s["status"] = 200;
  s["body"] = body;
  s["times"] = times;
  if (delay_ms > 0)
    s["delay_ms"] = delay_ms;
  script(s.dump());
}

std::string http_server::requests() const {
  return control("GET", "/__requests");
}

void http_server::reset() const {
  control("GET", "/__reset");
}

} // namespace mibyan::test
