#include "base/sandbox.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/credential_paths.hpp"
#include "base/subprocess.hpp"

namespace mibyan {

namespace {

std::string canonical(const std::string& path) {
  if (path.empty())
    return {};
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf) == nullptr)
    return {};
  return buf;
}

bool is_dir(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool is_file(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && !S_ISDIR(st.st_mode);
}

size_t depth(const std::string& path) {
  if (path == "/")
    return 0;
  return static_cast<size_t>(std::count(path.begin(), path.end(), '/'));
}

bool inside(const std::string& path, const std::string& dir) {
  if (dir == "/")
    return true;
  return path == dir
         || (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0
             && path[dir.size()] == '/');
}

struct mount_op {
  // bind_home_ro: the user's home read-only, exposing it like bind_rw.
  enum kind { hide_dir, bind_rw, hide_file, bind_ro, bind_home_ro } what;
  std::string path;
};

/// Entries of a home bound read-write at most (a bigger home keeps the
/// rest read-only).
constexpr size_t max_home_entries = 512;

// The visible entries of `home` (no dot files, no symlinks), sorted.
std::vector<std::string> working_entries(const std::string& home) {
  std::vector<std::string> out;
  DIR* d = ::opendir(home.c_str());
  if (d == nullptr)
    return out;
  while (auto* e = ::readdir(d)) {
    if (e->d_name[0] == '.')
      continue;
    auto p = home + "/" + e->d_name;
    struct stat st;
    if (::lstat(p.c_str(), &st) != 0
        || !(S_ISDIR(st.st_mode) || S_ISREG(st.st_mode)))
      continue;
    out.push_back(p);
    if (out.size() >= max_home_entries)
      break;
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// Counts the tasks (threads included) whose real uid is ours: the number
// RLIMIT_NPROC is checked against.
uint64_t scan_user_tasks() {
  uint64_t n = 0;
  auto uid = ::getuid();
  DIR* d = ::opendir("/proc");
  if (d == nullptr)
    return 0;
  while (auto* e = ::readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9')
      continue;
    std::string base = std::string{"/proc/"} + e->d_name;
    int fd = ::open((base + "/status").c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      continue;
    char buf[4096];
    auto got = ::read(fd, buf, sizeof(buf) - 1);
    ::close(fd);
    if (got <= 0)
      continue;
    buf[got] = '\0';
    const char* u = std::strstr(buf, "\nUid:");
    const char* t = std::strstr(buf, "\nThreads:");
    if (u == nullptr)
      continue;
    if (static_cast<uid_t>(std::strtoul(u + 5, nullptr, 10)) != uid)
      continue;
    n += t != nullptr ? std::max<uint64_t>(1, std::strtoull(t + 9, nullptr, 10))
                      : 1;
  }
  ::closedir(d);
  return n;
}

// scan_user_tasks() reads every /proc/PID/status; kernels start in bursts
// (pool refills), so a count younger than a few seconds is reused.
uint64_t count_user_tasks() {
  static std::mutex mtx;
  static std::chrono::steady_clock::time_point when;
  static uint64_t count = 0;
  std::lock_guard<std::mutex> guard{mtx};
  auto now = std::chrono::steady_clock::now();
  if (count == 0 || now - when > std::chrono::seconds(5)) {
    count = scan_user_tasks();
    when = now;
  }
  return count;
}

rlim_t clamp_to_hard(int resource, uint64_t want) {
  rlimit cur{};
  if (::getrlimit(resource, &cur) != 0)
    return static_cast<rlim_t>(want);
  if (cur.rlim_max != RLIM_INFINITY && want > cur.rlim_max)
    return cur.rlim_max;
  return static_cast<rlim_t>(want);
}

} // namespace

sandbox_setting parse_sandbox_setting(const std::string& text) {
  if (text == "required")
    return sandbox_setting::required;
  if (text == "off")
    return sandbox_setting::off;
  return sandbox_setting::automatic;
}

const sandbox_support& probe_sandbox() {
  static sandbox_support support;
  static std::once_flag once;
  std::call_once(once, [] {
    support.bwrap = find_executable("bwrap");
    if (support.bwrap.empty()) {
      support.reason = "bwrap (package bubblewrap) is not installed";
      return;
    }
    auto truth = find_executable("true");
    if (truth.empty())
      truth = "/bin/true";
    sandbox_policy p;
    p.view = sandbox_view::strict;
    p.workdir = "/";
    p.network = false;
    subprocess_options so;
    so.argv = sandbox_argv(support.bwrap, p, {truth});
    so.env = std::vector<std::string>{"PATH=/usr/bin:/bin"};
    so.timeout = std::chrono::seconds(5);
    so.kill_grace = std::chrono::milliseconds(200);
    so.merge_stderr = true;
    so.max_output_bytes = 4096;
    auto r = run_subprocess(so);
    if (!r.spawn_error.empty()) {
      support.reason = "cannot run bwrap: " + r.spawn_error;
    } else if (r.timed_out) {
      support.reason = "bwrap did not finish within 5 s";
    } else if (r.exit_code != 0) {
      auto out = r.out();
      while (!out.empty() && (out.back() == '\n' || out.back() == ' '))
        out.pop_back();
      support.reason = "bwrap cannot create namespaces here (exit "
                       + std::to_string(r.exit_code)
                       + (out.empty() ? std::string{} : ": " + out)
                       + "); user namespaces are probably not permitted";
    } else {
      support.available = true;
    }
  });
  return support;
}

std::vector<std::string> sandbox_argv(const std::string& bwrap,
                                      const sandbox_policy& policy,
                                      const std::vector<std::string>& command) {
  // Run as root, bwrap keeps every capability unless told otherwise; with
  // CAP_SYS_ADMIN a script could unmount what hides Mibyan's state.
  std::vector<std::string> a{bwrap,           "--die-with-parent",
                             "--unshare-pid", "--unshare-ipc",
                             "--unshare-uts", "--new-session",
                             "--cap-drop",    "ALL",
                             "--ro-bind",     "/",
                             "/",             "--dev",
                             "/dev",          "--proc",
                             "/proc",         "--tmpfs",
                             "/tmp"};
  // The fresh /proc still lets uid 0 write sysctls (kernel.core_pattern is
  // global) and sysrq: cover them read-only, as bwrap does unprivileged.
  for (const char* p : {"/proc/sys", "/proc/sysrq-trigger", "/proc/irq",
                        "/proc/bus"})
    a.insert(a.end(), {"--ro-bind-try", p, p});
  // Sockets of the user's session and of container engines stay
  // connectable on a read-only bind; root could drive the host with them.
  std::vector<std::string> hidden_dirs = policy.hidden_dirs;
  std::vector<std::string> hidden_files = policy.hidden_files;
  hidden_dirs.push_back(policy.view == sandbox_view::strict ? "/run"
                                                            : "/run/user");
  for (const char* sock : {"/run/docker.sock", "/run/containerd/containerd.sock",
                           "/run/podman/podman.sock", "/run/dbus/system_bus_socket"})
    hidden_files.push_back(sock);
  // Mounts apply in order, so parents go before children: a writable
  // working directory inside a hidden directory stays visible, and a
  // credential file inside a writable directory stays hidden.
  std::vector<mount_op> ops;
  std::vector<std::string> hidden;
  for (auto& d : hidden_dirs)
    if (auto c = canonical(d); !c.empty() && is_dir(c) && c != "/") {
      ops.push_back({mount_op::hide_dir, c});
      hidden.push_back(c);
    }
  auto home = canonical(policy.user_home);
  if (home == "/")
    home.clear();
  bool home_exposed = false;
  for (auto& d : policy.writable) {
    auto c = canonical(d);
    if (c.empty() || !is_dir(c))
      continue;
    if (!home.empty() && inside(home, c)) {
      // The home (or "/") as working directory: the home stays read-only
      // and only its visible entries are writable.
      home_exposed = true;
      if (c != home && c != "/")
        ops.push_back({mount_op::bind_rw, c});
      continue;
    }
    ops.push_back({mount_op::bind_rw, c});
  }
  std::vector<std::string> hidden_file_paths;
  for (auto& f : hidden_files)
    if (auto c = canonical(f); !c.empty() && is_file(c))
      hidden_file_paths.push_back(c);
  auto is_hidden = [&](const std::string& p) {
    for (auto& h : hidden)
      if (inside(p, h))
        return true;
    return std::find(hidden_file_paths.begin(), hidden_file_paths.end(), p)
           != hidden_file_paths.end();
  };
  // A home that is itself hidden stays hidden; an entry that is hidden
  // (Mibyan's home kept there, or a link's target) is not bound: a bind
  // at the same depth would come after the cover and undo it.
  if (home_exposed && !is_hidden(home)) {
    ops.push_back({mount_op::bind_home_ro, home});
    for (auto& e : working_entries(home))
      if (!is_hidden(e))
        ops.push_back({mount_op::bind_rw, e});
  }
  for (auto& c : hidden_file_paths)
    ops.push_back({mount_op::hide_file, c});
  for (auto& r : policy.readonly_paths) {
    auto c = canonical(r);
    if (c.empty() || !exists(c))
      continue;
    bool in_hidden = false;
    for (auto& h : hidden)
      in_hidden = in_hidden || inside(c, h);
    if (!in_hidden)
      ops.push_back({mount_op::bind_ro, c});
  }
  std::stable_sort(ops.begin(), ops.end(),
                   [](const mount_op& x, const mount_op& y) {
                     return depth(x.path) < depth(y.path);
                   });
  for (auto& op : ops) {
    // /tmp is already a fresh tmpfs; hiding anything below it is moot.
    if (op.what != mount_op::bind_rw && op.what != mount_op::bind_home_ro
        && inside(op.path, "/tmp")) {
      bool exposed = false;
      for (auto& o : ops)
        exposed = exposed
                  || ((o.what == mount_op::bind_rw
                       || o.what == mount_op::bind_home_ro)
                      && inside(op.path, o.path));
      if (!exposed)
        continue;
    }
    switch (op.what) {
      case mount_op::hide_dir:
        a.insert(a.end(), {"--tmpfs", op.path});
        break;
      case mount_op::bind_rw:
        a.insert(a.end(), {"--bind", op.path, op.path});
        break;
      case mount_op::hide_file:
        a.insert(a.end(), {"--ro-bind", "/dev/null", op.path});
        break;
      case mount_op::bind_ro:
      case mount_op::bind_home_ro:
        a.insert(a.end(), {"--ro-bind", op.path, op.path});
        break;
    }
  }
  if (policy.view == sandbox_view::strict)
    a.insert(a.end(), {"--remount-ro", "/tmp"});
  if (!policy.network || policy.view == sandbox_view::strict)
    a.push_back("--unshare-net");
  auto wd = canonical(policy.workdir);
  a.insert(a.end(), {"--chdir", wd.empty() ? policy.workdir : wd});
  a.push_back("--");
  a.insert(a.end(), command.begin(), command.end());
  return a;
}

prepared_limits prepare_limits(const sandbox_limits& limits) {
  prepared_limits p;
  if (limits.memory_bytes > 0) {
    auto v = clamp_to_hard(RLIMIT_AS, limits.memory_bytes);
    p.as = {v, v};
    p.set_as = true;
  }
  if (limits.open_files > 0) {
    auto v = clamp_to_hard(RLIMIT_NOFILE, limits.open_files);
    p.nofile = {v, v};
    p.set_nofile = true;
  }
  if (limits.processes > 0) {
    auto v = clamp_to_hard(RLIMIT_NPROC,
                           count_user_tasks() + limits.processes);
    p.nproc = {v, v};
    p.set_nproc = true;
  }
  return p;
}

bool apply_limits(const prepared_limits& limits) noexcept {
  bool ok = true;
  if (limits.set_as)
    ok = ::setrlimit(RLIMIT_AS, &limits.as) == 0 && ok;
  if (limits.set_nofile)
    ok = ::setrlimit(RLIMIT_NOFILE, &limits.nofile) == 0 && ok;
  if (limits.set_nproc)
    ok = ::setrlimit(RLIMIT_NPROC, &limits.nproc) == 0 && ok;
  return ok;
}

void add_state_paths(sandbox_policy& policy, const std::string& home) {
  if (!home.empty())
    policy.hidden_dirs.push_back(home);
  if (const char* h = std::getenv("HOME"); h != nullptr && *h != '\0')
    policy.hidden_dirs.push_back(std::string{h} + "/.mibyan");
  if (!home.empty())
    policy.hidden_files.push_back(home + "/.env");
  for (const char* var : {"MIBYAN_ENV", "MIBYAN_CONFIG"})
    if (const char* v = std::getenv(var); v != nullptr && *v != '\0')
      policy.hidden_files.push_back(v);
  const char* h = std::getenv("HOME");
  if (h == nullptr || *h == '\0')
    return;
  auto user_home = canonical(h);
  if (user_home.empty() || user_home == "/")
    return;
  policy.user_home = user_home;
  for (auto& l : user_credential_locations(user_home))
    (l.is_dir ? policy.hidden_dirs : policy.hidden_files).push_back(l.path);
  for (auto& f : startup_files(user_home))
    policy.readonly_paths.push_back(f);
  for (auto& d : startup_dirs(user_home))
    policy.readonly_paths.push_back(d);
}

bool workdir_contains_home(const std::string& workdir) {
  const char* h = std::getenv("HOME");
  if (h == nullptr || *h == '\0')
    return false;
  auto home = canonical(h);
  if (home.empty() || home == "/")
    return false;
  std::string wd = workdir;
  if (wd.empty()) {
    char buf[PATH_MAX];
    if (::getcwd(buf, sizeof(buf)) == nullptr)
      return false;
    wd = buf;
  }
  auto c = canonical(wd);
  return !c.empty() && inside(home, c);
}

} // namespace mibyan
