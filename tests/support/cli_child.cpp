#include "tests/support/cli_child.hpp"

#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <fcntl.h>
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

} // namespace mibyan::test
