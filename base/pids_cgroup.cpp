#include "base/pids_cgroup.hpp"

#include <cerrno>
#include <csignal>
#include <fstream>
#include <mutex>
#include <sstream>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace mibyan {

namespace {

bool is_dir(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool write_text(const std::string& path, const std::string& text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  bool ok = ::write(fd, text.data(), text.size())
            == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok;
}

// The directory under which this process may create its kernels' pids
// cgroups, or "".
std::string pids_base() {
  std::ifstream in("/proc/self/cgroup");
  std::string line, v1_path, v2_path;
  bool have_v2 = false;
  while (std::getline(in, line)) {
    auto a = line.find(':');
    auto b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos)
      continue;
    auto controllers = line.substr(a + 1, b - a - 1);
    auto path = line.substr(b + 1);
    std::stringstream ss(controllers);
    std::string c;
    while (std::getline(ss, c, ','))
      if (c == "pids")
        v1_path = path;
    if (line.compare(0, 3, "0::") == 0) {
      have_v2 = true;
      v2_path = path;
    }
  }
  if (!v1_path.empty()) {
    auto base = "/sys/fs/cgroup/pids" + (v1_path == "/" ? "" : v1_path);
    if (is_dir(base) && ::access(base.c_str(), W_OK) == 0)
      return base;
    return {};
  }
  // cgroup v2: only from the root cgroup (elsewhere the "no internal
  // processes" rule forbids enabling controllers for children).
  // Only where the pids controller is already enabled for children: this
  // never changes the machine's cgroup setup.
  if (have_v2 && v2_path == "/"
      && ::access("/sys/fs/cgroup/cgroup.procs", W_OK) == 0) {
    std::ifstream sc("/sys/fs/cgroup/cgroup.subtree_control");
    std::string word;
    while (sc >> word)
      if (word == "pids")
        return "/sys/fs/cgroup";
  }
  return {};
}

const std::string& base_dir() {
  static std::string base;
  static std::once_flag once;
  std::call_once(once, [] { base = pids_base(); });
  return base;
}

} // namespace

pids_cgroup make_pids_cgroup(const std::string& name, uint64_t max) {
  pids_cgroup cg;
  const auto& base = base_dir();
  if (base.empty() || name.empty() || name.find('/') != std::string::npos)
    return cg;
  auto dir = base + "/" + name;
  if (::mkdir(dir.c_str(), 0755) != 0)
    return cg;
  if (!write_text(dir + "/pids.max", std::to_string(max))) {
    ::rmdir(dir.c_str());
    return cg;
  }
  cg.procs_fd = ::open((dir + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
  if (cg.procs_fd < 0) {
    ::rmdir(dir.c_str());
    return cg;
  }
  cg.dir = dir;
  return cg;
}

bool join_pids_cgroup(int procs_fd) noexcept {
  if (procs_fd < 0)
    return true;
  // "0" is the writing process itself.
  return ::write(procs_fd, "0", 1) == 1;
}

void close_pids_cgroup_fd(pids_cgroup& cg) {
  if (cg.procs_fd >= 0)
    ::close(cg.procs_fd);
  cg.procs_fd = -1;
}

void remove_pids_cgroup(const std::string& dir, int wait_ms) {
  if (dir.empty())
    return;
  for (int waited = 0;; waited += 10) {
    // Whatever is still inside goes first (a cgroup cannot be escaped
    // without privileges, so this also catches re-parented daemons).
    {
      std::ifstream procs(dir + "/cgroup.procs");
      long pid = 0;
      while (procs >> pid)
        if (pid > 1 && pid != ::getpid())
          ::kill(static_cast<pid_t>(pid), SIGKILL);
    }
    if (::rmdir(dir.c_str()) == 0 || errno == ENOENT)
      return;
    if (errno != EBUSY || waited >= wait_ms)
      return;
    ::usleep(10000);
  }
}

bool pids_cgroup_available() {
  static bool ok = [] {
    auto cg = make_pids_cgroup("mibyan-probe-" + std::to_string(::getpid()),
                               8);
    bool made = !cg.dir.empty();
    close_pids_cgroup_fd(cg);
    remove_pids_cgroup(cg.dir, 0);
    return made;
  }();
  return ok;
}

} // namespace mibyan
