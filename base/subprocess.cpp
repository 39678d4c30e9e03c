#include "base/subprocess.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <cstdlib>

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/head_tail_buffer.hpp"
#include "base/process_sweep.hpp"

extern char** environ;

namespace mibyan {

namespace {

using clock_type = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Closes a descriptor once; -1 means "none".
void close_fd(int& fd) {
  if (fd >= 0)
    ::close(fd);
  fd = -1;
}

// Owns the descriptors of one run so every return path closes them.
struct fd_set_guard {
  int out_r = -1, out_w = -1, err_r = -1, err_w = -1, in_parent = -1,
      in_child = -1, pidfd = -1;
  ~fd_set_guard() {
    for (int* fd : {&out_r, &out_w, &err_r, &err_w, &in_parent, &in_child,
                    &pidfd})
      close_fd(*fd);
  }
};

const std::string& shell_path() {
  static const std::string path = ::access("/bin/bash", X_OK) == 0
                                    ? "/bin/bash"
                                    : "/bin/sh";
  return path;
}

bool is_directory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

int open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd >= 0)
    ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  return fd;
#else
  (void) pid;
  return -1;
#endif
}

// Returns whether `pid` has terminated, without reaping it: the zombie keeps
// the process group id reserved until we send the final signals.
bool has_exited(pid_t pid) {
  siginfo_t si;
  std::memset(&si, 0, sizeof(si));
  if (::waitid(P_PID, static_cast<id_t>(pid), &si,
               WEXITED | WNOHANG | WNOWAIT) != 0)
    return errno == ECHILD; // already reaped by someone else: treat as gone
  return si.si_pid == pid;
}

// Spawn-time objects with RAII cleanup.
struct spawn_setup {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  bool ok = false;
  spawn_setup() {
    ok = posix_spawn_file_actions_init(&actions) == 0;
    if (ok && posix_spawnattr_init(&attr) != 0) {
      posix_spawn_file_actions_destroy(&actions);
      ok = false;
    }
  }
  ~spawn_setup() {
    if (ok) {
      posix_spawn_file_actions_destroy(&actions);
      posix_spawnattr_destroy(&attr);
    }
  }
};

} // namespace

std::string find_executable(std::string_view name) {
  if (name.empty())
    return {};
  std::string n{name};
  auto executable = [](const std::string& p) {
    struct stat st;
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode)
           && ::access(p.c_str(), X_OK) == 0;
  };
  if (n.find('/') != std::string::npos)
    return executable(n) ? n : std::string{};
  const char* path = std::getenv("PATH");
  std::string_view dirs = path != nullptr ? path : "/usr/bin:/bin";
  while (true) {
    auto colon = dirs.find(':');
    auto dir = dirs.substr(0, colon);
    std::string candidate = dir.empty() ? n : std::string{dir} + "/" + n;
    if (executable(candidate))
      return candidate;
    if (colon == std::string_view::npos)
      break;
    dirs.remove_prefix(colon + 1);
  }
  return {};
}

subprocess_result run_subprocess(const subprocess_options& opts) {
  subprocess_result res;
  auto start = clock_type::now();
  auto done = [&]() -> subprocess_result {
    res.duration = std::chrono::duration_cast<milliseconds>(clock_type::now()
                                                            - start);
    return std::move(res);
  };
  // -- build argv and envp ----------------------------------------------------
  std::vector<std::string> args;
  if (!opts.shell_command.empty())
    args = {shell_path(), "-c", opts.shell_command};
  else
    args = opts.argv;
  if (args.empty() || args[0].empty()) {
    res.spawn_error = "no program given";
    return done();
  }
  for (auto& a : args)
    if (a.find('\0') != std::string::npos) {
      res.spawn_error = "arguments must not contain NUL bytes";
      return done();
    }
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  char** env = environ;
  std::string tag = opts.kill_leftovers ? new_process_tag() : std::string{};
  if (opts.env || !tag.empty()) {
    if (opts.env) {
      for (auto& e : *opts.env)
        envp.push_back(const_cast<char*>(e.c_str()));
    } else {
      for (char** e = environ; e != nullptr && *e != nullptr; ++e)
        envp.push_back(*e);
    }
    if (!tag.empty()) {
      // An inherited tag (a nested run) gives way to this run's own.
      std::string_view name{process_tag_variable};
      envp.erase(std::remove_if(envp.begin(), envp.end(),
                                [&](const char* e) {
                                  std::string_view v{e};
                                  return v.size() > name.size()
                                         && v.substr(0, name.size()) == name
                                         && v[name.size()] == '=';
                                }),
                 envp.end());
      envp.push_back(const_cast<char*>(tag.c_str()));
    }
    envp.push_back(nullptr);
    env = envp.data();
  }
  if (!opts.cwd.empty() && !is_directory(opts.cwd)) {
    res.spawn_error = "working directory does not exist or is not a "
                      "directory: " + opts.cwd;
    return done();
  }
  // -- descriptors ------------------------------------------------------------
  fd_set_guard fds;
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) {
    res.spawn_error = std::string{"pipe failed: "} + std::strerror(errno);
    return done();
  }
  fds.out_r = p[0];
  fds.out_w = p[1];
  if (!opts.merge_stderr) {
    if (::pipe2(p, O_CLOEXEC) != 0) {
      res.spawn_error = std::string{"pipe failed: "} + std::strerror(errno);
      return done();
    }
    fds.err_r = p[0];
    fds.err_w = p[1];
  }
  if (!opts.stdin_data.empty()) {
    // A socket rather than a pipe: send(MSG_NOSIGNAL) cannot raise SIGPIPE
    // when the child exits without reading its input.
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p) != 0) {
      res.spawn_error = std::string{"socketpair failed: "}
                        + std::strerror(errno);
      return done();
    }
    fds.in_parent = p[0];
    fds.in_child = p[1];
    ::shutdown(fds.in_child, SHUT_WR);
  }
  // -- spawn ------------------------------------------------------------------
  spawn_setup sp;
  if (!sp.ok) {
    res.spawn_error = "posix_spawn setup failed";
    return done();
  }
  int rc = 0;
  if (fds.in_child >= 0)
    rc |= posix_spawn_file_actions_adddup2(&sp.actions, fds.in_child, 0);
  else
    rc |= posix_spawn_file_actions_addopen(&sp.actions, 0, "/dev/null",
                                           O_RDONLY, 0);
  rc |= posix_spawn_file_actions_adddup2(&sp.actions, fds.out_w, 1);
  rc |= posix_spawn_file_actions_adddup2(&sp.actions,
                                         opts.merge_stderr ? fds.out_w
                                                           : fds.err_w,
                                         2);
  if (!opts.cwd.empty())
    rc |= posix_spawn_file_actions_addchdir_np(&sp.actions, opts.cwd.c_str());
  sigset_t mask, defaults;
  sigemptyset(&mask);
  sigfillset(&defaults);
  rc |= posix_spawnattr_setflags(&sp.attr, POSIX_SPAWN_SETPGROUP
                                             | POSIX_SPAWN_SETSIGMASK
                                             | POSIX_SPAWN_SETSIGDEF);
  rc |= posix_spawnattr_setpgroup(&sp.attr, 0);
  rc |= posix_spawnattr_setsigmask(&sp.attr, &mask);
  rc |= posix_spawnattr_setsigdefault(&sp.attr, &defaults);
  if (rc != 0) {
    res.spawn_error = "posix_spawn setup failed";
    return done();
  }
  pid_t pid = -1;
  bool search = args[0].find('/') == std::string::npos;
  rc = search ? ::posix_spawnp(&pid, argv[0], &sp.actions, &sp.attr,
                               argv.data(), env)
              : ::posix_spawn(&pid, argv[0], &sp.actions, &sp.attr,
                              argv.data(), env);
  if (rc != 0) {
    res.spawn_error = std::string{std::strerror(rc)} + ": " + args[0];
    return done();
  }
  res.pid = pid;
  close_fd(fds.out_w);
  close_fd(fds.err_w);
  close_fd(fds.in_child);
  for (int fd : {fds.out_r, fds.err_r, fds.in_parent})
    if (fd >= 0)
      ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  fds.pidfd = open_pidfd(pid);
  // -- event loop -------------------------------------------------------------
  auto out_buf = head_tail_buffer::with_cap(opts.max_output_bytes);
  auto err_buf = head_tail_buffer::with_cap(opts.max_output_bytes);
  bool feeding = static_cast<bool>(opts.on_output);
  bool exited = false;
  bool term_sent = false;
  bool kill_sent = false;
  auto never = clock_type::time_point::max();
  auto deadline = opts.timeout.count() > 0 ? start + opts.timeout : never;
  clock_type::time_point kill_at = never;
  clock_type::time_point settle_from = start; // exit or SIGKILL, the later
  clock_type::time_point last_data = start;
  size_t stdin_pos = 0;
  auto send_kill = [&] {
    ::kill(-pid, SIGKILL);
    kill_sent = true;
    settle_from = clock_type::now();
  };
  auto begin_termination = [&](milliseconds grace) {
    term_sent = true;
    ::kill(-pid, SIGTERM);
    kill_at = clock_type::now() + grace;
  };
  std::vector<char> chunk(64 * 1024);
  auto read_fd = [&](int& fd, output_stream which, head_tail_buffer& buf) {
    // Bounded number of reads per wake-up so that the timeout and the
    // cancel flag are checked even under a flood of output.
    for (int i = 0; i < 16 && fd >= 0; ++i) {
      auto n = ::read(fd, chunk.data(), chunk.size());
      if (n > 0) {
        last_data = clock_type::now();
        std::string_view data{chunk.data(), static_cast<size_t>(n)};
        if (feeding && !opts.on_output(which, data)) {
          feeding = false;
          res.stopped = true;
          if (!kill_sent)
            send_kill();
        }
        buf.append(data);
        continue;
      }
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return;
      close_fd(fd); // EOF or a hard error
    }
  };
  while (true) {
    auto now = clock_type::now();
    if (!term_sent && !kill_sent) {
      if (opts.cancel != nullptr && opts.cancel->load()) {
        res.cancelled = true;
        begin_termination(opts.cancel_grace);
      } else if (now >= deadline) {
        res.timed_out = true;
        begin_termination(opts.kill_grace);
      }
    }
    if (term_sent && !kill_sent && now >= kill_at)
      send_kill();
    if (!exited && has_exited(pid)) {
      exited = true;
      settle_from = std::max(settle_from, now);
      close_fd(fds.in_parent);
    }
    bool pipes_open = fds.out_r >= 0 || fds.err_r >= 0;
    if (exited && !pipes_open)
      break;
    // While SIGTERM's grace runs, wait for the whole group; otherwise stop
    // reading once the pipe stays quiet after the exit (a background
    // grandchild may hold it open forever).
    if (exited && (!term_sent || kill_sent)) {
      auto quiet_since = std::max(last_data, settle_from);
      if (now - quiet_since >= opts.drain_quiet
          || now - settle_from >= opts.drain_max)
        break;
    }
    // Sleep until the next event, at most 50 ms (the cancel flag's period).
    auto wake = now + milliseconds(50);
    wake = std::min({wake, deadline, kill_at});
    if (exited)
      wake = std::min(wake, std::max(last_data, settle_from)
                              + opts.drain_quiet);
    auto wait_ms = std::chrono::duration_cast<milliseconds>(wake - now)
                     .count();
    pollfd pfds[4];
    int n = 0, out_i = -1, err_i = -1, in_i = -1;
    if (fds.out_r >= 0) { pfds[n] = {fds.out_r, POLLIN, 0}; out_i = n++; }
    if (fds.err_r >= 0) { pfds[n] = {fds.err_r, POLLIN, 0}; err_i = n++; }
    if (fds.in_parent >= 0) {
      pfds[n] = {fds.in_parent, POLLOUT, 0};
      in_i = n++;
    }
    if (!exited && fds.pidfd >= 0)
      pfds[n++] = {fds.pidfd, POLLIN, 0};
    int prc = ::poll(pfds, static_cast<nfds_t>(n),
                     static_cast<int>(std::max<long long>(wait_ms, 1)));
    if (prc < 0 && errno != EINTR)
      break;
    if (prc <= 0)
      continue;
    auto ready = [&](int i) {
      return i >= 0 && (pfds[i].revents & (POLLIN | POLLHUP | POLLERR)) != 0;
    };
    if (ready(out_i))
      read_fd(fds.out_r, output_stream::out, out_buf);
    if (ready(err_i))
      read_fd(fds.err_r, output_stream::err, err_buf);
    if (in_i >= 0 && pfds[in_i].revents != 0) {
      auto& data = opts.stdin_data;
      auto sent = ::send(fds.in_parent, data.data() + stdin_pos,
                         data.size() - stdin_pos,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
      if (sent > 0)
        stdin_pos += static_cast<size_t>(sent);
      if ((sent < 0 && errno != EAGAIN && errno != EINTR)
          || stdin_pos >= data.size())
        close_fd(fds.in_parent);
    }
  }
  // -- stop what is left and reap ---------------------------------------------
  if (!exited) {
    // Only reached when poll failed: never leave the group running.
    ::kill(-pid, SIGKILL);
  } else if (term_sent || res.stopped
             || ((opts.kill_group_on_exit || opts.kill_leftovers)
                 && !kill_sent)) {
    // The leader is a zombie, so the group id cannot have been reused.
    ::kill(-pid, SIGKILL);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!tag.empty())
    kill_tagged_processes(tag);
  if (WIFEXITED(status)) {
    res.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    res.term_signal = WTERMSIG(status);
    res.exit_code = 128 + res.term_signal;
  }
  res.out_head = out_buf.head();
  res.out_tail = out_buf.tail();
  res.out_total = out_buf.total();
  res.out_omitted = out_buf.omitted();
  res.err_head = err_buf.head();
  res.err_tail = err_buf.tail();
  res.err_total = err_buf.total();
  res.err_omitted = err_buf.omitted();
  return done();
}

} // namespace mibyan
