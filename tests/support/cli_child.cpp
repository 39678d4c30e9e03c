#include "tests/support/cli_child.hpp"

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/support/paths.hpp"

namespace mibyan::test {

process_options cli_options(const std::string& home, int timeout_seconds) {
  process_options o;
  o.env["MIBYAN_HOME"] = home;
  o.unset = {"OPENAI_API_KEY", "OPENROUTER_API_KEY", "ANTHROPIC_API_KEY",
             "CUSTOM_API_KEY", "MIBYAN_LOG_LEVEL"};
  o.timeout_seconds = timeout_seconds;
  return o;
}

void exec_cli(const std::string& home, const std::vector<std::string>& args) {
  if (!home.empty())
    ::setenv("MIBYAN_HOME", home.c_str(), 1);
  for (auto v : {"OPENAI_API_KEY", "CUSTOM_API_KEY", "MIBYAN_LOG_LEVEL"})
    ::unsetenv(v);
  std::string bin = mibyan_binary();
  std::vector<std::string> copy = args;
  std::vector<char*> argv;
  argv.push_back(bin.data());
  for (auto& a : copy)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execv(bin.c_str(), argv.data());
  ::_exit(127);
}

pid_t spawn_cli(const std::vector<std::string>& args, const std::string& home,
                const std::string& out_path, const std::string& err_path,
                int* in) {
  int fds[2];
  BOOST_REQUIRE_EQUAL(::pipe(fds), 0);
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    BOOST_FAIL("fork failed");
  }
  if (pid == 0) {
    int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(fds[0], 0);
    ::dup2(out, 1);
    ::dup2(err, 2);
    ::close(fds[0]);
    ::close(fds[1]);
    exec_cli(home, args);
  }
  ::close(fds[0]);
  *in = fds[1];
  return pid;
}

namespace {

size_t count_of(const std::string& s, const std::string& part) {
  size_t n = 0;
  for (auto pos = s.find(part); pos != std::string::npos;
       pos = s.find(part, pos + part.size()))
    ++n;
  return n;
}

} // namespace

cli_pty::cli_pty(const std::vector<std::string>& args,
                 const std::vector<std::pair<std::string, std::string>>& env) {
  pid = ::forkpty(&master, nullptr, nullptr, nullptr);
  BOOST_REQUIRE(pid >= 0);
  if (pid == 0) {
    for (auto& [k, v] : env)
      ::setenv(k.c_str(), v.c_str(), 1);
    exec_cli({}, args);
  }
}

cli_pty::~cli_pty() {
  if (pid > 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  if (master >= 0)
    ::close(master);
}

void cli_pty::pump(int ms) {
  pollfd pfd{master, POLLIN, 0};
  if (::poll(&pfd, 1, ms) <= 0)
    return;
  char buf[4096];
  auto n = ::read(master, buf, sizeof buf);
  if (n > 0)
    seen.append(buf, static_cast<size_t>(n));
}

bool cli_pty::wait_for(const std::string& part, size_t times) {
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds{30};
  while (std::chrono::steady_clock::now() < end) {
    if (count_of(seen, part) >= times)
      return true;
    pump(50);
  }
  return count_of(seen, part) >= times;
}

void cli_pty::send(const std::string& text) {
  BOOST_REQUIRE_EQUAL(::write(master, text.data(), text.size()),
                      static_cast<ssize_t>(text.size()));
}

int cli_pty::finish() {
  send("\x04"); // end of input on the terminal
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds{30};
  int status = 0;
  while (std::chrono::steady_clock::now() < end) {
    pump(20);
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      pid = -1;
      for (int i = 0; i < 10; ++i)
        pump(10);
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
  }
  return -2;
}

} // namespace mibyan::test
