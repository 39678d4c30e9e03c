#include "kernels/kernel_process.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <dirent.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/env_scrub.hpp"
#include "kernels/runner_source.hpp"
#include "kernels/staging_dirs.hpp"
#include "kernels/stub_generator.hpp"
#include "base/errno_status.hpp"
#include "base/pids_cgroup.hpp"
#include "base/private_file.hpp"
#include "base/subprocess.hpp"

namespace fs = std::filesystem;

namespace mibyan {

namespace {

constexpr int child_watchdog_fd = 3;
constexpr int child_sentinel_fd = 4;
constexpr const char* marker_env = "MIBYAN_KERNEL_ID";

std::string temp_base() {
  const char* t = std::getenv("TMPDIR");
  return t && *t ? t : "/tmp";
}

// Kernels started by this process and not yet torn down, by staging dir,
// for the termination path (end_all_kernels_now).
struct live_kernel {
  pid_t pid;
  bool sandboxed;
  std::string marker;
  std::string cgroup_dir;
};
std::mutex live_mtx;
std::map<std::string, live_kernel>& live_kernels() {
  static std::map<std::string, live_kernel> m;
  return m;
}

// Reads a whole small /proc file ("" on error).
std::string read_proc(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return {};
  std::string out;
  char buf[8192];
  for (;;) {
    auto n = ::read(fd, buf, sizeof(buf));
    if (n <= 0)
      break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > (1u << 20))
      break;
  }
  ::close(fd);
  return out;
}

struct proc_entry {
  pid_t pid, ppid, pgrp;
};

std::vector<proc_entry> list_processes() {
  std::vector<proc_entry> out;
  DIR* d = ::opendir("/proc");
  if (d == nullptr)
    return out;
  while (auto* e = ::readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9')
      continue;
    auto stat = read_proc(std::string{"/proc/"} + e->d_name + "/stat");
    auto close_paren = stat.rfind(')');
    if (close_paren == std::string::npos || close_paren + 2 >= stat.size())
      continue;
    // state ppid pgrp ...
    const char* p = stat.c_str() + close_paren + 2;
    char state = *p;
    if (state == 'Z' || state == 'X')
      continue;
    char* end = nullptr;
    auto ppid = std::strtol(p + 1, &end, 10);
    auto pgrp = std::strtol(end, nullptr, 10);
    out.push_back({static_cast<pid_t>(std::atoi(e->d_name)),
                   static_cast<pid_t>(ppid), static_cast<pid_t>(pgrp)});
  }
  ::closedir(d);
  return out;
}

bool carries_marker(pid_t pid, const std::string& needle) {
  auto env = read_proc("/proc/" + std::to_string(pid) + "/environ");
  size_t pos = 0;
  while (pos < env.size()) {
    auto end = env.find('\0', pos);
    if (end == std::string::npos)
      end = env.size();
    if (env.compare(pos, end - pos, needle) == 0)
      return true;
    pos = end + 1;
  }
  return false;
}

} // namespace

std::string random_token(size_t n) {
  std::string raw(n, '\0');
  size_t got = 0;
  while (got < n) {
    auto r = ::getrandom(raw.data() + got, n - got, 0);
    if (r <= 0)
      break;
    got += static_cast<size_t>(r);
  }
  static const char alphabet[]
    = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (unsigned char c : raw) {
    acc = (acc << 8) | c;
    bits += 8;
    while (bits >= 6) {
      out += alphabet[(acc >> (bits - 6)) & 0x3F];
      bits -= 6;
    }
  }
  if (bits > 0)
    out += alphabet[(acc << (6 - bits)) & 0x3F];
  return out;
}

void close_kernel_fds(kernel_process& k) {
  for (int* fd : {&k.stdin_fd, &k.stdout_fd, &k.stderr_fd, &k.rpc_fd,
                  &k.watchdog_fd}) {
    if (*fd >= 0)
      ::close(*fd);
    *fd = -1;
  }
}

void remove_staging_dir(const std::string& dir) {
  if (dir.empty())
    return;
  {
    std::lock_guard<std::mutex> guard{live_mtx};
    live_kernels().erase(dir);
  }
  std::error_code ec;
  auto st = fs::symlink_status(dir, ec);
  if (ec || !fs::is_directory(st))
    return;
  fs::remove_all(dir, ec);
}

void signal_kernel(pid_t pid, int sig) {
  if (pid <= 0)
    return;
  ::kill(-pid, sig); // the kernel leads its own process group
  ::kill(pid, sig);
}

void end_kernel_processes(pid_t pid, bool sandboxed,
                          const std::string& marker,
                          const std::string& cgroup_dir) {
  if (pid > 0)
    signal_kernel(pid, SIGKILL);
  if (sandboxed || marker.empty()) {
    remove_pids_cgroup(cgroup_dir); // the PID namespace died with bwrap
    return;
  }
  // Without a sandbox: every process still carrying the kernel's marker
  // (its children, and a double-forked daemon that left its group) and
  // everything below those. The kernel's pid itself is not trusted here:
  // this may run after it was reaped and the number reused. Repeat until
  // no new process shows up (a fork bomb races the scan).
  auto needle = std::string{marker_env} + "=" + marker;
  auto self = ::getpid();
  std::set<pid_t> killed;
  for (int round = 0; round < 8; ++round) {
    auto procs = list_processes();
    std::map<pid_t, pid_t> parent;
    std::set<pid_t> marked;
    for (auto& p : procs) {
      parent[p.pid] = p.ppid;
      if (p.pid != self && p.pid != 1 && carries_marker(p.pid, needle))
        marked.insert(p.pid);
    }
    std::vector<pid_t> targets;
    for (auto& p : procs) {
      if (p.pid == self || p.pid == 1 || killed.count(p.pid) > 0)
        continue;
      bool hit = marked.count(p.pid) > 0;
      for (pid_t a = p.ppid, n = 0; !hit && a > 1 && n < 64; ++n) {
        if (marked.count(a) > 0)
          hit = true;
        auto i = parent.find(a);
        a = i == parent.end() ? 0 : i->second;
      }
      if (hit)
        targets.push_back(p.pid);
    }
    if (targets.empty())
      break;
    for (auto t : targets) {
      ::kill(t, SIGKILL);
      killed.insert(t);
    }
  }
  remove_pids_cgroup(cgroup_dir);
  // Orphans re-parented to this process (a subreaper) are our zombies now.
  for (auto t : killed) {
    for (int i = 0; i < 200; ++i) {
      int st = 0;
      auto rc = ::waitpid(t, &st, WNOHANG);
      if (rc != 0)
        break; // reaped, or not our child
      ::usleep(1000);
    }
  }
}

void end_all_kernels_now() {
  std::map<std::string, live_kernel> all;
  {
    std::lock_guard<std::mutex> guard{live_mtx};
    all.swap(live_kernels());
  }
  for (auto& [dir, k] : all) {
    signal_kernel(k.pid, SIGKILL);
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  // Reap the kernels (a zombie keeps its cgroup busy).
  for (auto& [dir, k] : all)
    for (int i = 0; i < 500; ++i) {
      int st = 0;
      if (::waitpid(k.pid, &st, WNOHANG) != 0)
        break;
      ::usleep(1000);
    }
  // Daemons of unsandboxed kernels (a sandbox's die with bwrap).
  for (auto& [dir, k] : all)
    end_kernel_processes(-1, k.sandboxed, k.marker, k.cgroup_dir);
}

bool reap_kernel(pid_t pid, int* status) {
  if (pid <= 0)
    return true;
  int st = 0;
  auto rc = ::waitpid(pid, &st, WNOHANG);
  if (rc == pid) {
    if (status)
      *status = st;
    return true;
  }
  return rc < 0 && errno == ECHILD;
}

result<kernel_process> spawn_kernel(const kernel_spawn_options& opts) {
  kernel_process k;
  auto fail = [&](std::string msg,
                  status_code code = status_code::unavailable) {
    close_kernel_fds(k);
    remove_staging_dir(k.staging_dir);
    remove_pids_cgroup(k.cgroup_dir, 0);
    k.pid = -1;
    return result<kernel_process>::failure(code, std::move(msg));
  };
  // Named after this process (pid and start time) so that a later
  // runtime can tell it is stale once we are gone (kernels/staging_dirs.hpp).
  std::string tmpl = staging_dir_template();
  if (::mkdtemp(tmpl.data()) == nullptr)
    return fail("cannot create a staging dir in " + temp_base() + ": "
                + std::strerror(errno));
  k.staging_dir = tmpl;
  ::chmod(k.staging_dir.c_str(), 0700);
  auto runner_path = k.staging_dir + "/" + std::string{kernel_runner_file};
  auto stub_path = k.staging_dir + "/mibyan_tools.py";
  // The runner and its modules side by side: it loads them from its own
  // directory (kernels/runner_source.hpp).
  status written;
  for (auto& m : kernel_modules()) {
    written = write_private_file(k.staging_dir + "/" + std::string{m.file_name},
                                 m.text, true);
    if (!written.ok())
      break;
  }
  if (written.ok())
    written = write_private_file(stub_path,
                                 generate_stub(opts.tools, opts.specs), true);
  if (!written.ok())
    return fail("cannot write the kernel files: " + written.error);
  k.token = random_token(32);
  k.sentinel = "@@MIBYAN-KERNEL-" + random_token(16) + "@@";
  k.cwd = opts.cwd.empty() ? k.staging_dir : opts.cwd;

  // RPC socket, 0600 inside the 0700 dir.
  k.socket_path = k.staging_dir + "/rpc.sock";
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (k.socket_path.size() >= sizeof(addr.sun_path))
    return fail("socket path too long: " + k.socket_path);
  std::memcpy(addr.sun_path, k.socket_path.c_str(), k.socket_path.size() + 1);
  k.rpc_fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  auto old_mask = ::umask(0177);
  bool bound = k.rpc_fd >= 0
               && ::bind(k.rpc_fd, reinterpret_cast<sockaddr*>(&addr),
                         sizeof(addr)) == 0;
  ::umask(old_mask);
  if (!bound || ::listen(k.rpc_fd, 64) != 0)
    return fail("cannot listen on " + k.socket_path + ": "
                + std::strerror(errno));
  ::chmod(k.socket_path.c_str(), 0600);

  // stdio socketpairs (CAF brokers read sockets, not pipes) and the
  // watchdog pipe (the child blocks on its read end; EOF means we died).
  int in_sv[2], out_sv[2], err_sv[2], wd[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in_sv) != 0)
    return fail(std::string{"socketpair: "} + std::strerror(errno));
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, out_sv) != 0) {
    ::close(in_sv[0]);
    ::close(in_sv[1]);
    return fail(std::string{"socketpair: "} + std::strerror(errno));
  }
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, err_sv) != 0) {
    for (int fd : {in_sv[0], in_sv[1], out_sv[0], out_sv[1]})
      ::close(fd);
    return fail(std::string{"socketpair: "} + std::strerror(errno));
  }
  if (::pipe2(wd, O_CLOEXEC) != 0) {
    for (int fd : {in_sv[0], in_sv[1], out_sv[0], out_sv[1], err_sv[0],
                   err_sv[1]})
      ::close(fd);
    return fail(std::string{"pipe: "} + std::strerror(errno));
  }
  k.stdin_fd = in_sv[0];
  k.stdout_fd = out_sv[0];
  k.stderr_fd = err_sv[0];
  k.watchdog_fd = wd[1];
  ::shutdown(k.stdout_fd, SHUT_WR);
  ::shutdown(k.stderr_fd, SHUT_WR);

  // The sentinel travels on a pipe (fd 4 in the child), never in the
  // environment, where a cell could read it and forge reply frames.
  int sp[2];
  if (::pipe2(sp, O_CLOEXEC) != 0) {
    for (int fd : {in_sv[1], out_sv[1], err_sv[1], wd[0]})
      ::close(fd);
    return fail(std::string{"pipe: "} + std::strerror(errno));
  }
  bool sent = ::write(sp[1], k.sentinel.data(), k.sentinel.size())
              == static_cast<ssize_t>(k.sentinel.size());
  ::close(sp[1]);
  // Reports an exec failure of the child (errno), CLOEXEC so success
  // closes it.
  int ep[2];
  if (!sent || ::pipe2(ep, O_CLOEXEC) != 0) {
    for (int fd : {in_sv[1], out_sv[1], err_sv[1], wd[0], sp[0]})
      ::close(fd);
    return fail(std::string{"pipe: "} + std::strerror(errno));
  }
  auto close_child_ends = [&] {
    for (int fd : {in_sv[1], out_sv[1], err_sv[1], wd[0], sp[0], ep[1]})
      ::close(fd);
  };

  env_scrub_options eo;
  eo.passthrough = opts.passthrough;
  eo.staging_dir = k.staging_dir;
  eo.rpc_socket = k.socket_path;
  eo.rpc_token = k.token;
  eo.sentinel_fd = child_sentinel_fd;
  eo.stub_path = stub_path;
  eo.watchdog_fd = child_watchdog_fd;
  eo.rpc_timeout = opts.rpc_timeout;
  // The host's time zone, so scripts see the same local time as the user.
  if (const char* tz = std::getenv("TZ"); tz != nullptr && *tz != '\0')
    eo.timezone = tz;
  auto env = build_kernel_env(opts.inherited_env, eo);
  k.dropped_env = env.dropped;
  k.marker = random_token(12);
  env.env.push_back(std::string{marker_env} + "=" + k.marker);
  k.sandboxed = !opts.bwrap.empty();
  if (k.sandboxed) {
    // Inside the sandbox /tmp is private (project) or read-only (strict).
    for (auto& e : env.env)
      if (e.rfind("TMPDIR=", 0) == 0)
        e.clear();
    env.env.erase(std::remove(env.env.begin(), env.env.end(), std::string{}),
                  env.env.end());
    env.env.push_back("TMPDIR=" + (opts.strict ? k.staging_dir
                                               : std::string{"/tmp"}));
  }

  auto python = opts.python;
  if (python.find('/') == std::string::npos) {
    auto found = find_executable(python);
    if (found.empty()) {
      close_child_ends();
      ::close(ep[0]);
      return fail("cannot start " + opts.python
                    + ": No such file or directory",
                  status_code::not_found);
    }
    python = found;
  }
  if (::access(python.c_str(), X_OK) != 0) {
    // Inside bwrap the failure would come too late to fall back.
    int e = errno;
    close_child_ends();
    ::close(ep[0]);
    return fail("cannot start " + opts.python + ": " + std::strerror(e),
                errno_code(e));
  }
  std::vector<std::string> argv_s{python, "-u", runner_path};
  if (k.sandboxed) {
    sandbox_policy pol;
    pol.view = opts.strict ? sandbox_view::strict : sandbox_view::project;
    pol.workdir = k.cwd;
    pol.writable = {k.staging_dir};
    if (!opts.strict && !opts.cwd.empty())
      pol.writable.insert(pol.writable.begin(), opts.cwd);
    add_state_paths(pol, opts.home);
    // Other kernels' staging dirs live under the temp dir.
    if (temp_base() != "/tmp")
      pol.hidden_dirs.push_back(temp_base());
    pol.network = !opts.strict;
    argv_s = sandbox_argv(opts.bwrap, pol, argv_s);
  }
  std::vector<char*> argv;
  for (auto& a : argv_s)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (auto& e : env.env)
    envp.push_back(e.data());
  envp.push_back(nullptr);
  auto limits = prepare_limits(opts.limits);
  // RLIMIT_NPROC never binds root; a pids cgroup does, where one can be
  // made (bwrap and its init need two more).
  pids_cgroup cg;
  if (opts.limits.processes > 0) {
    cg = make_pids_cgroup("mibyan-kernel-" + k.marker,
                          opts.limits.processes + 2);
    k.cgroup_dir = cg.dir;
  }
  int cg_fd = cg.procs_fd;
  auto cwd = k.cwd;
  int child_fds[5] = {in_sv[1], out_sv[1], err_sv[1], wd[0], sp[0]};
  int max_fd = 1024;
  if (rlimit nl{}; ::getrlimit(RLIMIT_NOFILE, &nl) == 0
                   && nl.rlim_cur != RLIM_INFINITY)
    max_fd = static_cast<int>(std::min<rlim_t>(nl.rlim_cur, 1 << 16));

  // fork + exec rather than posix_spawn: the limits are set in the child.
  // Between fork and exec only async-signal-safe calls.
  pid_t pid = ::fork();
  if (pid == 0) {
    join_pids_cgroup(cg_fd); // best effort: the rlimit still applies
    sigset_t none;
    sigemptyset(&none);
    struct sigaction dfl{};
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; ++sig)
      ::sigaction(sig, &dfl, nullptr);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::setsid();
    int err_fd = ::fcntl(ep[1], F_DUPFD_CLOEXEC, 10); // clear of 0..5
    if (err_fd < 0)
      err_fd = ep[1];
    auto die = [&](int e) {
      (void)!::write(err_fd, &e, sizeof(e));
      ::_exit(127);
    };
    // Park the ends above the target range, then move them into place.
    for (auto& fd : child_fds) {
      fd = ::fcntl(fd, F_DUPFD_CLOEXEC, 10);
      if (fd < 0)
        die(errno);
    }
    for (int target = 0; target < 5; ++target)
      if (::dup2(child_fds[target], target) < 0)
        die(errno);
    // No other descriptor of the host may reach the kernel: a directory fd
    // would let a script leave the sandbox's mount view. The error pipe
    // moves to fd 5 (CLOEXEC: exec closes it).
    if (::dup2(err_fd, 5) < 0 || ::fcntl(5, F_SETFD, FD_CLOEXEC) < 0)
      die(errno);
    err_fd = 5;
    bool closed = false;
#ifdef SYS_close_range
    closed = ::syscall(SYS_close_range, 6u, ~0u, 0u) == 0;
#endif
    for (int fd = 6; !closed && fd < max_fd; ++fd)
      ::close(fd);
    if (::chdir(cwd.c_str()) != 0)
      die(errno);
    if (!apply_limits(limits))
      die(errno);
    ::execve(argv[0], argv.data(), envp.data());
    die(errno);
  }
  int fork_errno = errno;
  close_child_ends();
  close_pids_cgroup_fd(cg);
  if (pid < 0) {
    ::close(ep[0]);
    return fail(std::string{"fork: "} + std::strerror(fork_errno));
  }
  int child_errno = 0;
  ssize_t got;
  do {
    got = ::read(ep[0], &child_errno, sizeof(child_errno));
  } while (got < 0 && errno == EINTR);
  ::close(ep[0]);
  if (got == static_cast<ssize_t>(sizeof(child_errno))) {
    int st = 0;
    ::waitpid(pid, &st, 0);
    return fail("cannot start " + argv_s.front() + ": "
                + std::strerror(child_errno));
  }
  k.pid = pid;
  {
    std::lock_guard<std::mutex> guard{live_mtx};
    live_kernels()[k.staging_dir]
      = live_kernel{pid, k.sandboxed, k.marker, k.cgroup_dir};
  }
  return std::move(k);
}

std::string resolve_interpreter(const std::string& python) {
  auto path = find_executable(python);
  if (path.empty())
    return python;
  char head[2] = {0, 0};
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  bool script = false;
  if (fd >= 0) {
    script = ::read(fd, head, 2) == 2 && head[0] == '#' && head[1] == '!';
    ::close(fd);
  }
  if (!script)
    return path;
  subprocess_options so;
  so.argv = {path, "-c", "import sys; sys.stdout.write(sys.executable)"};
  so.timeout = std::chrono::seconds(5);
  so.merge_stderr = false;
  auto r = run_subprocess(so);
  auto real = r.out();
  if (r.exit_code != 0 || real.empty() || real[0] != '/'
      || ::access(real.c_str(), X_OK) != 0)
    return path;
  return real;
}

bool probe_python(const std::string& python) {
  subprocess_options so;
  so.argv = {python, "-c",
             "import sys; sys.exit(0 if sys.version_info >= (3, 8) else 1)"};
  so.timeout = std::chrono::seconds(5);
  auto r = run_subprocess(so);
  return r.exit_code == 0 && !r.timed_out;
}

} // namespace mibyan
