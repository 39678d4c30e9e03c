#include "tools/mcp/mcp_stdio.hpp"

#include "tools/mcp/mcp_message.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "base/log.hpp"
#include "base/subprocess.hpp"

extern char** environ;

namespace mibyan {

namespace {

constexpr size_t tail_bytes = 4096;

void close_fd(int& fd) {
  if (fd >= 0)
    ::close(fd);
  fd = -1;
}

} // namespace

mcp_stdio_transport::mcp_stdio_transport(settings s) : s_(std::move(s)) {}

mcp_stdio_transport::~mcp_stdio_transport() {
  close();
}

status mcp_stdio_transport::start(handlers h, std::chrono::milliseconds) {
  h_ = std::move(h);
  if (s_.argv.empty())
    return status::failure(status_code::invalid_argument, "empty command");
  auto exe = find_executable(s_.argv[0]);
  if (exe.empty())
    return status::failure(status_code::not_found,
                           "command not found on PATH: " + s_.argv[0]);
  int in_pair[2], out_pipe[2], err_pipe[2], wake[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in_pair) != 0)
    return status::failure(status_code::unavailable,
                           std::string{"socketpair: "} + std::strerror(errno));
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
    ::close(in_pair[0]);
    ::close(in_pair[1]);
    return status::failure(status_code::unavailable, "pipe failed");
  }
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    for (int fd : {in_pair[0], in_pair[1], out_pipe[0], out_pipe[1]})
      ::close(fd);
    return status::failure(status_code::unavailable, "pipe failed");
  }
  if (::pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    for (int fd : {in_pair[0], in_pair[1], out_pipe[0], out_pipe[1],
                   err_pipe[0], err_pipe[1]})
      ::close(fd);
    return status::failure(status_code::unavailable, "pipe failed");
  }
  // The child reads from a socket: a write to a dead child then fails with
  // EPIPE (MSG_NOSIGNAL) instead of raising SIGPIPE in the host.
  ::shutdown(in_pair[1], SHUT_RD);
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&attr);
  posix_spawn_file_actions_adddup2(&fa, in_pair[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err_pipe[1], 2);
  if (!s_.cwd.empty())
    posix_spawn_file_actions_addchdir_np(&fa, s_.cwd.c_str());
  sigset_t mask, defaults;
  sigemptyset(&mask);
  sigfillset(&defaults);
  sigdelset(&defaults, SIGKILL);
  sigdelset(&defaults, SIGSTOP);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP
                                    | POSIX_SPAWN_SETSIGMASK
                                    | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setsigmask(&attr, &mask);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  std::vector<char*> argv;
  for (auto& a : s_.argv)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (auto& e : s_.env)
    envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, exe.c_str(), &fa, &attr, argv.data(),
                         envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  ::close(in_pair[0]);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (rc != 0) {
    for (int fd : {in_pair[1], out_pipe[0], err_pipe[0], wake[0], wake[1]})
      ::close(fd);
    return status::failure(status_code::unavailable,
                           "cannot start " + s_.argv[0] + ": "
                             + std::strerror(rc));
  }
  pid_ = pid;
  in_fd_ = in_pair[1];
  out_fd_ = out_pipe[0];
  err_fd_ = err_pipe[0];
  wake_r_ = wake[0];
  wake_w_ = wake[1];
  if (!s_.stderr_log.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(
      std::filesystem::path(s_.stderr_log).parent_path(), ec);
    log_fd_ = ::open(s_.stderr_log.c_str(),
                     O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  }
  reader_ = std::thread([this] { reader_loop(); });
  return {};
}

status mcp_stdio_transport::send(const std::string& message) {
  std::lock_guard<std::mutex> guard{send_mtx_};
  if (in_fd_ < 0 || closing_)
    return status::failure(status_code::unavailable, "the server is closed");
  std::string line = message;
  line += '\n';
  size_t off = 0;
  while (off < line.size()) {
    auto n = ::send(in_fd_, line.data() + off, line.size() - off,
                    MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return status::failure(status_code::unavailable,
                             std::string{"write to the server failed: "}
                               + std::strerror(errno));
    }
    off += static_cast<size_t>(n);
  }
  return {};
}

void mcp_stdio_transport::on_stderr(const char* data, size_t n) {
  std::lock_guard<std::mutex> guard{err_mtx_};
  err_tail_.append(data, n);
  if (err_tail_.size() > tail_bytes)
    err_tail_.erase(0, err_tail_.size() - tail_bytes);
  if (log_fd_ < 0 || err_logged_ >= s_.stderr_log_cap)
    return;
  size_t room = s_.stderr_log_cap - err_logged_;
  std::string chunk(data, std::min(n, room));
  // Prefix each line with the server name so one log serves all servers.
  std::string out;
  out.reserve(chunk.size() + 32);
  static thread_local bool at_line_start = true;
  for (char c : chunk) {
    if (at_line_start)
      out += "[" + s_.server + "] ";
    out += c;
    at_line_start = c == '\n';
  }
  err_logged_ += chunk.size();
  if (err_logged_ >= s_.stderr_log_cap)
    out += "\n[" + s_.server + "] (stderr log cap reached; further output "
           "dropped)\n";
  auto w = ::write(log_fd_, out.data(), out.size());
  (void) w;
}

void mcp_stdio_transport::reader_loop() {
  mcp_line_reader reader{s_.max_message_bytes};
  std::string reason;
  std::vector<char> buf(64 * 1024);
  bool out_open = true;
  bool err_open = true;
  auto on_message = [&](std::string m) { h_.on_message(std::move(m)); };
  auto on_skipped = [&](size_t bytes) {
    MIBYAN_LOG(warning, "mcp",
               s_.server << ": skipped a stdout line that is no JSON-RPC "
                            "message ("
                         << bytes << " bytes)");
  };
  while (out_open) {
    pollfd fds[3] = {{out_fd_, POLLIN, 0},
                     {err_open ? err_fd_ : -1, POLLIN, 0},
                     {wake_r_, POLLIN, 0}};
    int rc = ::poll(fds, 3, -1);
    if (rc < 0) {
      if (errno == EINTR)
        continue;
      reason = std::string{"poll failed: "} + std::strerror(errno);
      break;
    }
    if (fds[2].revents != 0) {
      reason = "closed";
      break;
    }
    if (err_open && fds[1].revents != 0) {
      auto n = ::read(err_fd_, buf.data(), buf.size());
      if (n > 0)
        on_stderr(buf.data(), static_cast<size_t>(n));
      else if (n == 0 || (errno != EINTR && errno != EAGAIN))
        err_open = false;
    }
    if (fds[0].revents != 0) {
      auto n = ::read(out_fd_, buf.data(), buf.size());
      if (n < 0 && (errno == EINTR || errno == EAGAIN))
        continue;
      if (n <= 0) {
        out_open = false;
        reason = "the server closed its output";
        break;
      }
      if (!reader.feed(std::string_view{buf.data(), static_cast<size_t>(n)},
                       on_message, on_skipped)) {
        reason = "the server sent a message larger than "
                 + std::to_string(s_.max_message_bytes) + " bytes";
        out_open = false;
        break;
      }
    }
  }
  bool by_us = closing_.load();
  stop_child();
  if (!by_us && h_.on_closed)
    h_.on_closed(reason);
}

void mcp_stdio_transport::stop_child() {
  int pid = pid_.load();
  if (pid <= 0)
    return;
  {
    std::lock_guard<std::mutex> guard{send_mtx_};
    close_fd(in_fd_); // EOF on stdin: a well-behaved server exits now
  }
  auto exited = [&] {
    int st = 0;
    return ::waitpid(pid, &st, WNOHANG) == pid;
  };
  bool gone = false;
  for (int i = 0; i < 10 && !gone; ++i) { // up to 200 ms for a clean exit
    gone = exited();
    if (!gone)
      ::usleep(20000);
  }
  if (!gone) {
    ::kill(-pid, SIGTERM);
    for (int i = 0; i < 25 && !gone; ++i) { // up to 500 ms after SIGTERM
      gone = exited();
      if (!gone)
        ::usleep(20000);
    }
  }
  ::kill(-pid, SIGKILL); // the group's leftovers too
  if (!gone) {
    int st = 0;
    while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
  }
  pid_ = -1;
}

void mcp_stdio_transport::close() {
  closing_ = true;
  if (wake_w_ >= 0) {
    char c = 1;
    auto w = ::write(wake_w_, &c, 1);
    (void) w;
  }
  if (reader_.joinable() && reader_.get_id() != std::this_thread::get_id())
    reader_.join();
  {
    std::lock_guard<std::mutex> guard{send_mtx_};
    close_fd(in_fd_);
  }
  close_fd(out_fd_);
  // What the server wrote to stderr before the reader stopped (a server
  // that exits at once): keep it for the error's tail, without waiting.
  if (err_fd_ >= 0 && ::fcntl(err_fd_, F_SETFL,
                              ::fcntl(err_fd_, F_GETFL) | O_NONBLOCK) == 0) {
    char buf[4096];
    for (int i = 0; i < 16; ++i) {
      auto n = ::read(err_fd_, buf, sizeof buf);
      if (n <= 0)
        break;
      on_stderr(buf, static_cast<size_t>(n));
    }
  }
  close_fd(err_fd_);
  close_fd(wake_r_);
  close_fd(wake_w_);
  close_fd(log_fd_);
}

std::string mcp_stdio_transport::stderr_tail() const {
  std::lock_guard<std::mutex> guard{err_mtx_};
  return err_tail_;
}

} // namespace mibyan
