#include "base/process_registry.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <random>

#include <fcntl.h>
#include <pty.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "base/errno_status.hpp"

namespace mibyan {

using clock_type = std::chrono::steady_clock;

struct process_registry::proc {
  std::string id;
  std::string session_id;
  std::string command;
  bool pty = false;
  int pid = -1;
  int out_fd = -1;  // read side (pty master or pipe); owned by the reader
  int in_fd = -1;   // write side (pty master dup or pipe); -1 once closed
  uint64_t key = 0;
  clock_type::time_point started;
  int64_t started_at = 0;
  clock_type::time_point ended;
  bool running = true;
  bool out_eof = false;
  int exit_code = -1;
  int term_signal = 0;
  const char* kill_source = nullptr; // set when we killed it
  std::string buffer;
  uint64_t total = 0;
  std::function<void(const process_snapshot&)> on_exit; // process_spec
};

namespace {

void fill(process_snapshot& s, const process_registry::proc& p,
          bool with_output, size_t cap);

} // namespace

namespace {

std::string random_id() {
  static std::mutex m;
  static std::mt19937_64 rng{std::random_device{}()};
  std::lock_guard<std::mutex> g{m};
  auto x = rng();
  char buf[32];
  std::snprintf(buf, sizeof buf, "proc_%012llx",
                static_cast<unsigned long long>(x & 0xffffffffffffULL));
  return buf;
}

void set_cloexec_nonblock(int fd, bool nonblock) {
  ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  if (nonblock)
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
}

void close_fd(int& fd) {
  if (fd >= 0)
    ::close(fd);
  fd = -1;
}

// In the child between fork and exec: async-signal-safe calls only.
[[noreturn]] void exec_child(const char* shell, char* const argv[],
                             char* const envp[], const char* cwd) {
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  for (int s = 1; s < NSIG; ++s)
    ::sigaction(s, &dfl, nullptr);
  if (cwd[0] != '\0' && ::chdir(cwd) != 0)
    ::_exit(126);
  ::execve(shell, argv, envp);
  ::_exit(127);
}

} // namespace

process_registry::process_registry(size_t max_processes, size_t buffer_bytes)
  : max_(max_processes), buffer_bytes_(buffer_bytes) {
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (epoll_fd_ >= 0 && wake_fd_ >= 0) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = 0;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
    reader_ = std::thread{[this] { reader_loop(); }};
  }
}

process_registry::~process_registry() {
  shutdown();
}

result<process_registry::started>
process_registry::start(const process_spec& spec) {
  {
    std::lock_guard<std::mutex> g{mtx_};
    if (stopping_ || epoll_fd_ < 0) {
      return status::failure(status_code::unavailable,
                             "background processes are unavailable (the "
                             "runtime is shutting down)");
    }
    size_t live = 0;
    for (auto& p : procs_)
      live += p->running ? 1 : 0;
    if (live >= max_) {
      return status::failure(
        status_code::resource_exhausted,
        "Too many background processes: " + std::to_string(max_)
          + " are running (the limit). Kill one with "
            "process(action=\"kill\", session_id=...) or wait for "
            "one to finish before starting another.");
    }
    // Forget finished processes, oldest first, to stay within the cap.
    while (procs_.size() >= max_) {
      auto it = std::find_if(procs_.begin(), procs_.end(),
                             [](auto& p) { return !p->running; });
      if (it == procs_.end())
        break;
      procs_.erase(it);
    }
  }
  // -- prepare everything the child needs before forking -------------------
  const char* shell = ::access("/bin/bash", X_OK) == 0 ? "/bin/bash"
                                                       : "/bin/sh";
  std::vector<std::string> args{shell, "-c", spec.command};
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<std::string> env = spec.env;
  if (spec.pty) {
    // A plain terminal: no colour or cursor tricks from readline, and
    // Python's basic REPL (driven line by line with write/submit).
    auto set = [&](const std::string& name, const std::string& value) {
      auto prefix = name + "=";
      env.erase(std::remove_if(env.begin(), env.end(),
                               [&](const std::string& e) {
                                 return e.rfind(prefix, 0) == 0;
                               }),
                env.end());
      env.push_back(prefix + value);
    };
    set("TERM", "dumb");
    set("PYTHON_BASIC_REPL", "1");
  }
  std::vector<char*> envp;
  for (auto& e : env)
    envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const char* cwd = spec.cwd.c_str();

  auto p = std::make_shared<proc>();
  p->session_id = spec.session_id;
  p->command = spec.command;
  p->pty = spec.pty;
  p->on_exit = spec.on_exit;
  int pid = -1;
  if (spec.pty) {
    int master = -1, slave = -1;
    winsize ws{};
    ws.ws_row = 24;
    ws.ws_col = 200;
    if (::openpty(&master, &slave, nullptr, nullptr, &ws) != 0) {
      return errno_status(errno, "openpty failed");
    }
    set_cloexec_nonblock(master, false);
    set_cloexec_nonblock(slave, false);
    pid = ::fork();
    if (pid == 0) {
      ::setsid();
      ::ioctl(slave, TIOCSCTTY, 0);
      ::dup2(slave, 0);
      ::dup2(slave, 1);
      ::dup2(slave, 2);
      exec_child(shell, argv.data(), envp.data(), cwd);
    }
    int err = errno;
    ::close(slave);
    if (pid < 0) {
      ::close(master);
      return errno_status(err, "fork failed");
    }
    p->out_fd = master;
    p->in_fd = ::fcntl(master, F_DUPFD_CLOEXEC, 0);
    set_cloexec_nonblock(p->out_fd, true);
  } else {
    // stdin is a socket: send(MSG_NOSIGNAL) cannot raise SIGPIPE when the
    // child stops reading.
    int in[2], out[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in) != 0) {
      return errno_status(errno, "socketpair failed");
    }
    if (::pipe2(out, O_CLOEXEC) != 0) {
      auto failed = errno_status(errno, "pipe failed");
      ::close(in[0]);
      ::close(in[1]);
      return failed;
    }
    pid = ::fork();
    if (pid == 0) {
      ::setpgid(0, 0);
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      ::dup2(out[1], 2);
      exec_child(shell, argv.data(), envp.data(), cwd);
    }
    int err = errno;
    ::close(in[0]);
    ::close(out[1]);
    if (pid < 0) {
      ::close(in[1]);
      ::close(out[0]);
      return errno_status(err, "fork failed");
    }
    // Also from the parent, so a kill right after start reaches the group.
    ::setpgid(pid, pid);
    ::shutdown(in[1], SHUT_RD);
    p->out_fd = out[0];
    p->in_fd = in[1];
    set_cloexec_nonblock(p->out_fd, true);
    set_cloexec_nonblock(p->in_fd, true);
  }
  p->pid = pid;
  p->started = clock_type::now();
  p->started_at = std::chrono::duration_cast<std::chrono::seconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
  std::lock_guard<std::mutex> g{mtx_};
  do {
    p->id = random_id();
  } while (std::any_of(procs_.begin(), procs_.end(),
                       [&](auto& q) { return q->id == p->id; }));
  p->key = next_key_++;
  by_key_[p->key] = p;
  procs_.push_back(p);
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.u64 = p->key;
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, p->out_fd, &ev) != 0) {
    p->out_eof = true;
    close_fd(p->out_fd);
  }
  if (stopping_)
    kill_group(*p, "shutdown");
  return started{p->id, pid};
}

void process_registry::reader_loop() {
  std::vector<epoll_event> events(64);
  std::vector<char> buf(65536);
  while (true) {
    int n = ::epoll_wait(epoll_fd_, events.data(),
                         static_cast<int>(events.size()), 100);
    std::unique_lock<std::mutex> lock{mtx_};
    for (int i = 0; i < n; ++i) {
      auto key = events[i].data.u64;
      if (key == 0) {
        uint64_t x;
        while (::read(wake_fd_, &x, sizeof x) > 0) {
        }
        continue;
      }
      auto it = by_key_.find(key);
      if (it == by_key_.end())
        continue;
      auto p = it->second;
      bool eof = false;
      // Read what is there (bounded per wake-up so one chatty process
      // cannot starve the others).
      for (int round = 0; round < 16; ++round) {
        auto r = ::read(p->out_fd, buf.data(), buf.size());
        if (r > 0) {
          p->buffer.append(buf.data(), static_cast<size_t>(r));
          p->total += static_cast<uint64_t>(r);
          if (p->buffer.size() > buffer_bytes_ + buffer_bytes_ / 2)
            p->buffer.erase(0, p->buffer.size() - buffer_bytes_);
          continue;
        }
        if (r < 0 && (errno == EAGAIN || errno == EINTR))
          break;
        eof = true; // 0, or EIO from a PTY whose slave side closed
        break;
      }
      if (eof) {
        ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, p->out_fd, nullptr);
        close_fd(p->out_fd);
        p->out_eof = true;
        by_key_.erase(key);
      }
    }
    reap_locked();
    // notify_on_complete: processes that ended on their own, once their
    // output is drained (or 500 ms after the exit), told outside the lock.
    std::vector<std::pair<std::function<void(const process_snapshot&)>,
                          process_snapshot>>
      ended;
    auto now = clock_type::now();
    for (auto& p : procs_) {
      if (p->running || !p->on_exit)
        continue;
      if (p->kill_source != nullptr || stopping_) {
        p->on_exit = nullptr;
        continue;
      }
      if (!p->out_eof && now - p->ended < std::chrono::milliseconds{500})
        continue;
      process_snapshot snap;
      fill(snap, *p, true, 4000);
      ended.emplace_back(std::move(p->on_exit), std::move(snap));
      p->on_exit = nullptr;
    }
    cv_.notify_all();
    if (!ended.empty()) {
      lock.unlock();
      for (auto& [fn, snap] : ended) {
        try {
          fn(snap);
        } catch (...) {
        }
      }
      lock.lock();
    }
    if (stopping_ && by_key_.empty()
        && std::none_of(procs_.begin(), procs_.end(),
                        [](auto& p) { return p->running; }))
      return;
  }
}

void process_registry::reap_locked() {
  for (auto& p : procs_) {
    if (!p->running)
      continue;
    int status = 0;
    auto r = ::waitpid(p->pid, &status, WNOHANG);
    if (r == 0)
      continue;
    p->running = false;
    p->ended = clock_type::now();
    if (r < 0) {
      p->exit_code = -1;
    } else if (WIFEXITED(status)) {
      p->exit_code = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
      p->term_signal = WTERMSIG(status);
      p->exit_code = 128 + p->term_signal;
    }
    close_fd(p->in_fd);
  }
}

void process_registry::kill_group(proc& p, const char* source) {
  if (!p.running)
    return;
  if (p.kill_source == nullptr)
    p.kill_source = source;
  ::kill(-p.pid, SIGTERM);
  ::kill(-p.pid, SIGCONT);
}

std::shared_ptr<process_registry::proc>
process_registry::find_locked(const std::string& session_id,
                              const std::string& id) {
  for (auto& p : procs_)
    if (p->id == id && p->session_id == session_id)
      return p;
  return nullptr;
}

namespace {

void fill(process_snapshot& s, const process_registry::proc& p,
          bool with_output, size_t cap);

} // namespace

std::vector<process_snapshot>
process_registry::list(const std::string& session_id) {
  std::lock_guard<std::mutex> g{mtx_};
  std::vector<process_snapshot> out;
  for (auto& p : procs_) {
    if (p->session_id != session_id)
      continue;
    out.emplace_back();
    fill(out.back(), *p, false, buffer_bytes_);
  }
  return out;
}

bool process_registry::get(const std::string& session_id,
                           const std::string& id, process_snapshot& out) {
  std::lock_guard<std::mutex> g{mtx_};
  auto p = find_locked(session_id, id);
  if (!p)
    return false;
  fill(out, *p, true, buffer_bytes_);
  return true;
}

process_registry::wait_result
process_registry::wait(const std::string& session_id, const std::string& id,
                       std::chrono::milliseconds timeout,
                       const std::atomic<bool>* cancel) {
  auto until = clock_type::now() + timeout;
  std::unique_lock<std::mutex> lock{mtx_};
  auto p = find_locked(session_id, id);
  if (!p)
    return wait_result::not_found;
  while (true) {
    auto now = clock_type::now();
    if (!p->running
        && (p->out_eof || now - p->ended > std::chrono::milliseconds{500}))
      return wait_result::exited;
    if (cancel && cancel->load())
      return wait_result::cancelled;
    if (now >= until)
      return wait_result::timeout;
    auto slice = std::min<clock_type::duration>(
      until - now, std::chrono::milliseconds{50});
    cv_.wait_for(lock, slice);
  }
}

status process_registry::kill(const std::string& session_id,
                              const std::string& id,
                              std::chrono::milliseconds grace) {
  std::unique_lock<std::mutex> lock{mtx_};
  auto p = find_locked(session_id, id);
  if (!p)
    return status::failure(status_code::not_found, "not found");
  if (!p->running) {
    // The leader is gone; stragglers of its group may not be.
    ::kill(-p->pid, SIGKILL);
    return {};
  }
  kill_group(*p, "process_tool");
  auto until = clock_type::now() + grace;
  while (p->running && clock_type::now() < until)
    cv_.wait_for(lock, std::chrono::milliseconds{50});
  ::kill(-p->pid, SIGKILL);
  until = clock_type::now() + std::chrono::seconds{5};
  while (p->running && clock_type::now() < until)
    cv_.wait_for(lock, std::chrono::milliseconds{50});
  return {};
}

status process_registry::write(const std::string& session_id,
                               const std::string& id,
                               const std::string& data) {
  int fd;
  bool pty;
  {
    std::lock_guard<std::mutex> g{mtx_};
    auto p = find_locked(session_id, id);
    if (!p)
      return status::failure(status_code::not_found, "not found");
    if (!p->running)
      return status::failure(status_code::invalid_argument,
                             "the process has exited");
    if (p->in_fd < 0)
      return status::failure(status_code::invalid_argument,
                             "stdin of the process is closed");
    fd = ::fcntl(p->in_fd, F_DUPFD_CLOEXEC, 0);
    pty = p->pty;
  }
  if (fd < 0)
    return errno_status(errno, "cannot write");
  size_t off = 0;
  status err;
  auto until = clock_type::now() + std::chrono::seconds{5};
  while (off < data.size()) {
    auto r = pty ? ::write(fd, data.data() + off, data.size() - off)
                 : ::send(fd, data.data() + off, data.size() - off,
                          MSG_NOSIGNAL);
    if (r > 0) {
      off += static_cast<size_t>(r);
      continue;
    }
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0 && errno == EAGAIN && clock_type::now() < until) {
      ::usleep(10000);
      continue;
    }
    err = r < 0 ? errno_status(errno, "write failed")
                : status::failure(status_code::unavailable,
                                  "write failed: no progress");
    break;
  }
  ::close(fd);
  return err;
}

status process_registry::close_stdin(const std::string& session_id,
                                     const std::string& id) {
  std::lock_guard<std::mutex> g{mtx_};
  auto p = find_locked(session_id, id);
  if (!p)
    return status::failure(status_code::not_found, "not found");
  if (p->in_fd < 0)
    return {};
  if (p->pty) {
    // A terminal cannot be half-closed: send the EOF character instead.
    termios t{};
    char eof = 4;
    if (::tcgetattr(p->in_fd, &t) == 0 && t.c_cc[VEOF] != 0)
      eof = static_cast<char>(t.c_cc[VEOF]);
    if (::write(p->in_fd, &eof, 1) != 1)
      return errno_status(errno, "write failed");
    return {};
  }
  close_fd(p->in_fd);
  return {};
}

void process_registry::close_session(const std::string& session_id) {
  std::unique_lock<std::mutex> lock{mtx_};
  std::vector<std::shared_ptr<proc>> mine;
  for (auto& p : procs_)
    if (p->session_id == session_id) {
      kill_group(*p, "session_close");
      mine.push_back(p);
    }
  if (mine.empty())
    return;
  auto alive = [&] {
    return std::any_of(mine.begin(), mine.end(),
                       [](auto& p) { return p->running; });
  };
  auto until = clock_type::now() + std::chrono::seconds{2};
  while (alive() && clock_type::now() < until)
    cv_.wait_for(lock, std::chrono::milliseconds{50});
  for (auto& p : mine)
    ::kill(-p->pid, SIGKILL);
  until = clock_type::now() + std::chrono::seconds{5};
  while (alive() && clock_type::now() < until)
    cv_.wait_for(lock, std::chrono::milliseconds{50});
  procs_.erase(std::remove_if(procs_.begin(), procs_.end(),
                              [&](auto& p) {
                                return p->session_id == session_id
                                       && !p->running;
                              }),
               procs_.end());
}

void process_registry::shutdown() {
  {
    std::unique_lock<std::mutex> lock{mtx_};
    if (stopping_ && !reader_.joinable())
      return;
    stopping_ = true;
    for (auto& p : procs_)
      kill_group(*p, "shutdown");
    auto alive = [&] {
      return std::any_of(procs_.begin(), procs_.end(),
                         [](auto& p) { return p->running; });
    };
    auto until = clock_type::now() + std::chrono::milliseconds{1000};
    while (alive() && clock_type::now() < until && reader_.joinable())
      cv_.wait_for(lock, std::chrono::milliseconds{50});
    // Everything left, leaders and stragglers alike.
    for (auto& p : procs_)
      ::kill(-p->pid, SIGKILL);
  }
  if (reader_.joinable()) {
    uint64_t one = 1;
    (void) !::write(wake_fd_, &one, sizeof one);
    // The reader returns once all leaders are reaped and outputs closed;
    // a group member holding the output open was SIGKILLed above.
    {
      std::unique_lock<std::mutex> lock{mtx_};
      auto until = clock_type::now() + std::chrono::seconds{5};
      while (clock_type::now() < until
             && std::any_of(procs_.begin(), procs_.end(),
                            [](auto& p) { return p->running; }))
        cv_.wait_for(lock, std::chrono::milliseconds{50});
      // Give up on output still held open (e.g. a process that escaped
      // the group): stop watching it.
      for (auto& [key, p] : by_key_) {
        ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, p->out_fd, nullptr);
        close_fd(p->out_fd);
        p->out_eof = true;
      }
      by_key_.clear();
      for (auto& p : procs_)
        if (p->running) {
          // Still not reaped: reap synchronously (it was SIGKILLed).
          int status;
          if (::waitpid(p->pid, &status, 0) == p->pid) {
            p->running = false;
            p->exit_code = 128 + SIGKILL;
            p->term_signal = SIGKILL;
          }
        }
    }
    (void) !::write(wake_fd_, &one, sizeof one);
    reader_.join();
  }
  std::lock_guard<std::mutex> g{mtx_};
  for (auto& p : procs_) {
    close_fd(p->in_fd);
    close_fd(p->out_fd);
  }
  close_fd(epoll_fd_);
  close_fd(wake_fd_);
}

size_t process_registry::running() const {
  std::lock_guard<std::mutex> g{mtx_};
  return static_cast<size_t>(std::count_if(
    procs_.begin(), procs_.end(), [](auto& p) { return p->running; }));
}

namespace {

void fill(process_snapshot& s, const process_registry::proc& p,
          bool with_output, size_t cap) {
  s.id = p.id;
  s.session_id = p.session_id;
  s.command = p.command;
  s.pid = p.pid;
  s.pty = p.pty;
  s.running = p.running;
  s.started_at = p.started_at;
  auto end = p.running ? clock_type::now() : p.ended;
  s.uptime_seconds = std::chrono::duration<double>(end - p.started).count();
  if (!p.running) {
    s.exit_code = p.exit_code;
    s.term_signal = p.term_signal;
    if (p.kill_source != nullptr) {
      s.completion_reason = "killed";
      s.termination_source = p.kill_source;
    } else {
      s.completion_reason = p.term_signal != 0 ? "signal" : "exited";
      s.termination_source = "process";
    }
  }
  s.output_total = p.total;
  if (with_output) {
    auto& b = p.buffer;
    // The buffer may run up to 1.5x over between trims: show the newest.
    s.output = b.size() > cap ? b.substr(b.size() - cap) : b;
  }
}

} // namespace

} // namespace mibyan
