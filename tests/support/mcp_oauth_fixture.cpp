#include "tests/support/mcp_oauth_fixture.hpp"

#include <cerrno>
#include <csignal>
#include <stdexcept>

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/http_client.hpp"
#include "tests/support/paths.hpp"

extern char** environ;

namespace mibyan::test {

namespace {

using clock_type = std::chrono::steady_clock;

http_result call(const std::string& method, const std::string& url,
                 const std::string& body = {}) {
  static http_client http;
  http_request req;
  req.method = method;
  req.url = url;
  req.body = body;
  if (!body.empty())
    req.headers.emplace_back("Content-Type", "application/json");
  req.total_timeout = std::chrono::seconds{20};
  return http.fetch(std::move(req));
}

} // namespace

oauth_test_server::oauth_test_server() {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0)
    throw std::runtime_error("oauth_test_server: pipe failed");
  auto parent = ::getpid();
  pid_ = ::fork();
  if (pid_ < 0)
    throw std::runtime_error("oauth_test_server: fork failed");
  if (pid_ == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent)
      ::_exit(1);
    ::dup2(out[1], 1);
    auto script = test_source_dir() + "/support/mcp_oauth_server.py";
    ::execlp("python3", "python3", "-u", script.c_str(),
             static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(out[1]);
  std::string line;
  auto deadline = clock_type::now() + std::chrono::seconds{10};
  while (line.find('\n') == std::string::npos
         && clock_type::now() < deadline) {
    pollfd p{out[0], POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0)
      continue;
    char c;
    if (::read(out[0], &c, 1) != 1)
      break;
    line += c;
  }
  ::close(out[0]);
  port_ = std::atoi(line.c_str());
  if (port_ <= 0)
    throw std::runtime_error("oauth_test_server: no port from the script");
}

oauth_test_server::~oauth_test_server() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int st;
    ::waitpid(pid_, &st, 0);
  }
}

std::string oauth_test_server::url(const std::string& path) const {
  return "http://127.0.0.1:" + std::to_string(port_) + path;
}

void oauth_test_server::configure(const std::string& json) const {
  auto r = call("POST", url("/__config"), json);
  if (r.summary.status != 200)
    throw std::runtime_error("oauth_test_server: /__config failed");
}

json::value oauth_test_server::state() const {
  auto r = call("GET", url("/__state"));
  auto parsed = json::parse(r.body);
  return parsed ? *parsed.v : json::value{};
}

running_child::running_child(const std::vector<std::string>& argv,
                             const std::map<std::string, std::string>& env) {
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0)
    throw std::runtime_error("running_child: pipe failed");
  auto parent = ::getpid();
  pid_ = ::fork();
  if (pid_ < 0)
    throw std::runtime_error("running_child: fork failed");
  if (pid_ == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent)
      ::_exit(1);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0)
      ::dup2(devnull, 0);
    for (auto& [k, v] : env)
      ::setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> args;
    for (auto& a : argv)
      args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(out[1]);
  ::close(err[1]);
  out_fd_ = out[0];
  err_fd_ = err[0];
}

running_child::~running_child() {
  if (exit_ == -1000 && pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int st;
    ::waitpid(pid_, &st, 0);
  }
  if (out_fd_ >= 0)
    ::close(out_fd_);
  if (err_fd_ >= 0)
    ::close(err_fd_);
}

bool running_child::pump(std::chrono::milliseconds limit) {
  pollfd p[2] = {{out_fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}};
  int n = 0;
  for (auto& x : p)
    n += x.fd >= 0 ? 1 : 0;
  if (n == 0)
    return false;
  if (::poll(p, 2, static_cast<int>(limit.count())) <= 0)
    return true;
  char buf[4096];
  for (int i = 0; i < 2; ++i) {
    if (p[i].fd < 0 || p[i].revents == 0)
      continue;
    auto got = ::read(p[i].fd, buf, sizeof buf);
    if (got <= 0) {
      ::close(p[i].fd);
      (i == 0 ? out_fd_ : err_fd_) = -1;
    } else {
      (i == 0 ? out_ : err_).append(buf, static_cast<size_t>(got));
    }
  }
  return true;
}

std::string running_child::wait_for_line(const std::string& prefix,
                                         std::chrono::milliseconds limit) {
  auto deadline = clock_type::now() + limit;
  while (true) {
    size_t start = 0;
    while (start < out_.size()) {
      auto nl = out_.find('\n', start);
      if (nl == std::string::npos)
        break;
      auto line = out_.substr(start, nl - start);
      auto first = line.find_first_not_of(' ');
      if (first != std::string::npos
          && line.compare(first, prefix.size(), prefix) == 0)
        return line.substr(first);
      start = nl + 1;
    }
    auto now = clock_type::now();
    if (now >= deadline)
      return {};
    if (!pump(std::chrono::duration_cast<std::chrono::milliseconds>(
          std::min<clock_type::duration>(deadline - now,
                                         std::chrono::milliseconds{200}))))
      return {};
  }
}

int running_child::wait(std::chrono::milliseconds limit) {
  if (exit_ != -1000)
    return exit_;
  auto deadline = clock_type::now() + limit;
  while (pump(std::chrono::milliseconds{100}) && clock_type::now() < deadline) {
  }
  int st = 0;
  while (true) {
    auto r = ::waitpid(pid_, &st, WNOHANG);
    if (r == pid_)
      break;
    if (clock_type::now() >= deadline) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &st, 0);
      break;
    }
    pump(std::chrono::milliseconds{50});
  }
  for (int i = 0; i < 50 && pump(std::chrono::milliseconds{10}); ++i) {
  }
  exit_ = WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st);
  return exit_;
}

long browser_get(const std::string& url, std::string* body) {
  auto r = call("GET", url);
  if (body)
    *body = r.body;
  return r.summary.status;
}

} // namespace mibyan::test
