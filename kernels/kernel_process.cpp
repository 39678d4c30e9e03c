#include "kernels/kernel_process.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fcntl.h>
#include <spawn.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/env_scrub.hpp"
#include "kernels/runner_source.hpp"
#include "kernels/stub_generator.hpp"
#include "base/private_file.hpp"
#include "base/subprocess.hpp"

namespace fs = std::filesystem;

namespace mibyan {

namespace {

constexpr int child_watchdog_fd = 3;

std::string temp_base() {
  const char* t = std::getenv("TMPDIR");
  return t && *t ? t : "/tmp";
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

kernel_process spawn_kernel(const kernel_spawn_options& opts,
                            std::string* error) {
  kernel_process k;
  auto fail = [&](std::string msg) {
    if (error)
      *error = std::move(msg);
    close_kernel_fds(k);
    remove_staging_dir(k.staging_dir);
    k.pid = -1;
    return k;
  };
  std::string tmpl = temp_base() + "/mibyan_kernel_XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr)
    return fail("cannot create a staging dir in " + temp_base() + ": "
                + std::strerror(errno));
  k.staging_dir = tmpl;
  ::chmod(k.staging_dir.c_str(), 0700);
  auto runner_path = k.staging_dir + "/mibyan_kernel_runner.py";
  auto stub_path = k.staging_dir + "/mibyan_tools.py";
  auto written = write_private_file(runner_path, kernel_runner_source(), true);
  if (written.empty())
    written = write_private_file(stub_path, generate_stub(opts.tools, opts.extra_tools), true);
  if (!written.empty())
    return fail("cannot write the kernel files: " + written);
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

  env_scrub_options eo;
  eo.passthrough = opts.passthrough;
  eo.staging_dir = k.staging_dir;
  eo.rpc_socket = k.socket_path;
  eo.rpc_token = k.token;
  eo.sentinel = k.sentinel;
  eo.stub_path = stub_path;
  eo.watchdog_fd = child_watchdog_fd;
  eo.rpc_timeout = opts.rpc_timeout;
  // The host's time zone, so scripts see the same local time as the user.
  if (const char* tz = std::getenv("TZ"); tz != nullptr && *tz != '\0')
    eo.timezone = tz;
  auto env = build_kernel_env(opts.inherited_env, eo);
  k.dropped_env = env.dropped;

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in_sv[1], 0);
  posix_spawn_file_actions_adddup2(&fa, out_sv[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err_sv[1], 2);
  posix_spawn_file_actions_adddup2(&fa, wd[0], child_watchdog_fd);
  posix_spawn_file_actions_addchdir_np(&fa, k.cwd.c_str());
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK
                                    | POSIX_SPAWN_SETSIGDEF);
  std::vector<std::string> argv_s{opts.python, "-u", runner_path};
  std::vector<char*> argv;
  for (auto& a : argv_s)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (auto& e : env.env)
    envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = -1;
  int rc = ::posix_spawnp(&pid, opts.python.c_str(), &fa, &attr, argv.data(),
                          envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  for (int fd : {in_sv[1], out_sv[1], err_sv[1], wd[0]})
    ::close(fd);
  if (rc != 0)
    return fail("cannot start " + opts.python + ": " + std::strerror(rc));
  k.pid = pid;
  return k;
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
