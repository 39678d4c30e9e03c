#include "tests/support/paths.hpp"
#include "tests/support/kernel_runner_process.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <thread>

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace mibyan::test {

namespace {

using clock_type = std::chrono::steady_clock;

constexpr size_t max_frame = 64u * 1024u * 1024u;

int remaining_ms(clock_type::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                deadline - clock_type::now()).count();
  return left <= 0 ? 0 : static_cast<int>(left);
}

// Moves `fd` to `target` in a forked child, leaving it inheritable.
void move_fd(int fd, int target) {
  if (fd == target) {
    ::fcntl(fd, F_SETFD, 0);
    return;
  }
  ::dup2(fd, target);
}

} // namespace

runner_process::runner_process(const runner_spawn_options& opts) {
  int in[2], out[2], err[2], wd[2] = {-1, -1}, sp[2] = {-1, -1};
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0
      || ::pipe2(err, O_CLOEXEC) != 0
      || (opts.watchdog && ::pipe2(wd, O_CLOEXEC) != 0)
      || (!opts.sentinel.empty() && ::pipe2(sp, O_CLOEXEC) != 0))
    throw std::runtime_error("pipe2 failed");
  if (sp[1] >= 0) {
    // A sentinel is far below the pipe buffer: the write cannot block.
    if (::write(sp[1], opts.sentinel.data(), opts.sentinel.size())
        != static_cast<ssize_t>(opts.sentinel.size()))
      throw std::runtime_error("sentinel write failed");
    ::close(sp[1]);
  }
  std::vector<std::string> argv{opts.python, opts.runner};
  std::vector<char*> args;
  for (auto& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<char*> envp;
  for (auto& e : opts.env)
    envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  pid_ = ::fork();
  if (pid_ < 0)
    throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    ::setsid();
    // Park the pipe ends above the target range before moving them.
    int fds[5] = {in[0], out[1], err[1], wd[0], sp[0]};
    for (auto& fd : fds)
      if (fd >= 0)
        fd = ::fcntl(fd, F_DUPFD_CLOEXEC, 10);
    move_fd(fds[0], 0);
    move_fd(fds[1], 1);
    move_fd(fds[2], 2);
    if (fds[3] >= 0)
      move_fd(fds[3], runner_watchdog_fd);
    if (fds[4] >= 0)
      move_fd(fds[4], runner_sentinel_fd);
    int keep = fds[4] >= 0 ? runner_sentinel_fd
               : fds[3] >= 0 ? runner_watchdog_fd : 2;
    for (int fd = keep + 1; fd < 1024; ++fd)
      ::close(fd);
    if (!opts.cwd.empty() && ::chdir(opts.cwd.c_str()) != 0)
      ::_exit(126);
    if (std::strchr(args[0], '/') != nullptr)
      ::execve(args[0], args.data(), envp.data());
    else
      ::execvpe(args[0], args.data(), envp.data());
    ::_exit(127);
  }
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  if (wd[0] >= 0)
    ::close(wd[0]);
  if (sp[0] >= 0)
    ::close(sp[0]);
  in_ = in[1];
  out_ = out[0];
  errfd_ = err[0];
  watchdog_ = wd[1];
  ::signal(SIGPIPE, SIG_IGN);
}

runner_process::~runner_process() {
  if (!reaped_) {
    ::kill(-pid_, SIGKILL);
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  for (int fd : {in_, out_, errfd_, watchdog_})
    if (fd >= 0)
      ::close(fd);
}

bool runner_process::send_line(const std::string& line) {
  if (in_ < 0)
    return false;
  std::string data = line + "\n";
  size_t off = 0;
  while (off < data.size()) {
    auto n = ::write(in_, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

bool runner_process::pump(int timeout_ms) {
  pollfd fds[2];
  int n = 0;
  int out_idx = -1, err_idx = -1;
  if (!out_eof_) {
    fds[n] = {out_, POLLIN, 0};
    out_idx = n++;
  }
  if (errfd_ >= 0) {
    fds[n] = {errfd_, POLLIN, 0};
    err_idx = n++;
  }
  if (n == 0)
    return false;
  int rc = ::poll(fds, static_cast<nfds_t>(n), timeout_ms);
  if (rc <= 0)
    return rc < 0 && errno == EINTR;
  char chunk[65536];
  if (out_idx >= 0 && fds[out_idx].revents != 0) {
    auto got = ::read(out_, chunk, sizeof(chunk));
    if (got <= 0)
      out_eof_ = true;
    else
      buf_.append(chunk, static_cast<size_t>(got));
  }
  if (err_idx >= 0 && fds[err_idx].revents != 0) {
    auto got = ::read(errfd_, chunk, sizeof(chunk));
    if (got <= 0) {
      ::close(errfd_);
      errfd_ = -1;
    } else {
      err_.append(chunk, static_cast<size_t>(got));
    }
  }
  return true;
}

runner_frame runner_process::read_frame(const std::string& sentinel,
                                        std::chrono::milliseconds timeout) {
  runner_frame f;
  auto deadline = clock_type::now() + timeout;
  const std::string marker = "\n" + sentinel + " ";
  size_t search_from = 0;
  for (;;) {
    auto pos = buf_.find(marker, search_from);
    if (pos == std::string::npos)
      search_from = buf_.size() >= marker.size()
                      ? buf_.size() - marker.size() + 1
                      : 0;
    else
      search_from = pos;
    if (pos != std::string::npos) {
      auto len_start = pos + marker.size();
      auto nl = buf_.find('\n', len_start);
      if (nl != std::string::npos) {
        auto len_text = buf_.substr(len_start, nl - len_start);
        bool digits = !len_text.empty() && len_text.size() <= 12
                      && len_text.find_first_not_of("0123456789")
                           == std::string::npos;
        if (!digits) {
          // A forged marker printed at fd level: it is raw output.
          search_from = pos + 1;
          continue;
        }
        auto len = std::stoull(len_text);
        if (len > max_frame) {
          f.raw = buf_.substr(0, pos);
          f.error = "bad-length";
          return f;
        }
        if (buf_.size() - (nl + 1) >= len) {
          f.raw = buf_.substr(0, pos);
          f.body_text = buf_.substr(nl + 1, len);
          buf_.erase(0, nl + 1 + len);
          auto parsed = json::parse(f.body_text);
          if (!parsed.v || !parsed.v->is_object()) {
            f.error = "bad-json";
            return f;
          }
          f.body = std::move(*parsed.v);
          f.ok = true;
          return f;
        }
      }
    }
    if (out_eof_) {
      f.raw = buf_;
      buf_.clear();
      f.error = "eof";
      return f;
    }
    auto left = remaining_ms(deadline);
    if (left == 0) {
      f.raw = buf_;
      f.error = "timeout";
      return f;
    }
    pump(left);
  }
}

runner_frame runner_process::run(const std::string& sentinel,
                                 const std::string& code,
                                 std::chrono::milliseconds timeout) {
  auto id = "cell-" + std::to_string(++cells_);
  if (!send_line("{\"id\": \"" + id + "\", \"code\": " + json::quote(code)
                 + "}")) {
    runner_frame f;
    f.error = "eof";
    return f;
  }
  return read_frame(sentinel, timeout);
}

std::string runner_process::drain_stdout(std::chrono::milliseconds timeout) {
  auto deadline = clock_type::now() + timeout;
  while (!out_eof_) {
    auto left = remaining_ms(deadline);
    if (left == 0)
      break;
    pump(left);
  }
  std::string out;
  out.swap(buf_);
  return out;
}

void runner_process::close_watchdog() {
  if (watchdog_ >= 0) {
    ::close(watchdog_);
    watchdog_ = -1;
  }
}

bool runner_process::kill_cell() {
  char k = 'K';
  return watchdog_ >= 0 && ::write(watchdog_, &k, 1) == 1;
}

void runner_process::close_stdin() {
  if (in_ >= 0) {
    ::close(in_);
    in_ = -1;
  }
}

std::optional<int> runner_process::wait_exit(
  std::chrono::milliseconds timeout) {
  if (reaped_)
    return exit_code_;
  auto deadline = clock_type::now() + timeout;
  for (;;) {
    int status = 0;
    auto rc = ::waitpid(pid_, &status, WNOHANG);
    if (rc == pid_) {
      reaped_ = true;
      if (WIFEXITED(status))
        exit_code_ = WEXITSTATUS(status);
      else if (WIFSIGNALED(status))
        exit_code_ = -WTERMSIG(status);
      // Collect what the child wrote just before it exited.
      auto drain_until = clock_type::now() + std::chrono::milliseconds(500);
      while ((!out_eof_ || errfd_ >= 0) && remaining_ms(drain_until) > 0)
        pump(50);
      return exit_code_;
    }
    if (rc < 0 || remaining_ms(deadline) == 0)
      return std::nullopt;
    // Keep the pipes drained so the child never blocks on a full pipe.
    if (!pump(20))
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::string make_kernel_sentinel() {
  static const char alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  unsigned char bytes[16] = {};
  std::ifstream urandom("/dev/urandom", std::ios::binary);
  urandom.read(reinterpret_cast<char*>(bytes), sizeof(bytes));
  std::string out = "@@MIBYAN-KERNEL-";
  for (auto b : bytes)
    out += alphabet[b & 63];
  return out + "@@";
}

std::string kernel_runner_path() {
  return source_dir() + "/kernels/mibyan_kernel_runner.py";
}

std::vector<std::string> current_environment() {
  std::vector<std::string> out;
  for (char** e = environ; *e != nullptr; ++e)
    out.emplace_back(*e);
  return out;
}

bool process_alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat)
    return ::kill(pid, 0) == 0;
  std::string text((std::istreambuf_iterator<char>(stat)),
                   std::istreambuf_iterator<char>());
  auto paren = text.rfind(')');
  if (paren == std::string::npos || paren + 2 >= text.size())
    return false;
  char state = text[paren + 2];
  return state != 'Z' && state != 'X';
}

} // namespace mibyan::test
