#include "tests/support/paths.hpp"
#include "tests/support/process.hpp"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <stdexcept>
#include <thread>

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace mibyan::test {

child_process::~child_process() {
  if (pid > 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
}

int child_process::stop(int sig, int no_exit) {
  ::kill(pid, sig);
  for (int i = 0; i < 6000; ++i) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      pid = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds{10});
  }
  return no_exit;
}

process_result run_process(const std::vector<std::string>& argv,
                           const process_options& opts) {
  int in_pipe[2], out_pipe[2], err_pipe[2];
  if (::pipe2(in_pipe, O_CLOEXEC) != 0 || ::pipe2(out_pipe, O_CLOEXEC) != 0
      || ::pipe2(err_pipe, O_CLOEXEC) != 0)
    throw std::runtime_error("pipe failed");
  pid_t pid = ::fork();
  if (pid < 0)
    throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::dup2(in_pipe[0], 0);
    ::dup2(out_pipe[1], 1);
    ::dup2(err_pipe[1], 2);
    ::setpgid(0, 0);
    for (auto& [k, v] : opts.env)
      ::setenv(k.c_str(), v.c_str(), 1);
    for (auto& k : opts.unset)
      ::unsetenv(k.c_str());
    if (!opts.cwd.empty() && ::chdir(opts.cwd.c_str()) != 0)
      ::_exit(126);
    std::vector<char*> args;
    for (auto& a : argv)
      args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  ::close(in_pipe[0]);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (opts.on_started)
    opts.on_started(static_cast<int>(pid));
  ::fcntl(in_pipe[1], F_SETFL, O_NONBLOCK);
  size_t written = 0;
  if (opts.input.empty()) {
    ::close(in_pipe[1]);
    in_pipe[1] = -1;
  }
  process_result res;
  auto deadline = std::chrono::steady_clock::now()
                  + std::chrono::seconds(opts.timeout_seconds);
  bool out_open = true, err_open = true;
  char buf[65536];
  while (out_open || err_open) {
    pollfd fds[3];
    int n = 0;
    int out_idx = -1, err_idx = -1, in_idx = -1;
    if (out_open) { fds[n] = {out_pipe[0], POLLIN, 0}; out_idx = n++; }
    if (err_open) { fds[n] = {err_pipe[0], POLLIN, 0}; err_idx = n++; }
    if (in_pipe[1] >= 0) { fds[n] = {in_pipe[1], POLLOUT, 0}; in_idx = n++; }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                  deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      ::kill(-pid, SIGKILL);
      ::kill(pid, SIGKILL);
      break;
    }
    int rc = ::poll(fds, n, static_cast<int>(std::min<long long>(left, 1000)));
    if (rc < 0 && errno != EINTR)
      break;
    auto drain = [&](int idx, int fd, std::string& dst, bool& open) {
      if (idx < 0 || !(fds[idx].revents & (POLLIN | POLLHUP | POLLERR)))
        return;
      auto got = ::read(fd, buf, sizeof(buf));
      if (got <= 0)
        open = false;
      else
        dst.append(buf, static_cast<size_t>(got));
    };
    drain(out_idx, out_pipe[0], res.out, out_open);
    drain(err_idx, err_pipe[0], res.err, err_open);
    if (in_idx >= 0 && (fds[in_idx].revents & (POLLOUT | POLLERR | POLLHUP))) {
      auto w = ::write(in_pipe[1], opts.input.data() + written,
                       opts.input.size() - written);
      if (w > 0)
        written += static_cast<size_t>(w);
      if (w < 0 || written == opts.input.size()) {
        ::close(in_pipe[1]);
        in_pipe[1] = -1;
      }
    }
  }
  if (in_pipe[1] >= 0)
    ::close(in_pipe[1]);
  ::close(out_pipe[0]);
  ::close(err_pipe[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFEXITED(status))
    res.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status))
    res.exit_code = -WTERMSIG(status);
  return res;
}

process_result run_mibyan(const std::vector<std::string>& args,
                          const process_options& opts) {
  std::vector<std::string> argv{mibyan_binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_process(argv, opts);
}

} // namespace mibyan::test
