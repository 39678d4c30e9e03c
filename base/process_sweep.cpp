#include "base/process_sweep.hpp"

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string_view>
#include <vector>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace mibyan {

namespace {

/// Scans before the sweep gives up on a process tree that keeps forking.
constexpr int max_scans = 20;

/// Bytes of /proc/PID/environ read; a tag beyond them is not seen.
constexpr size_t max_environ_bytes = 1 << 20;

// Whether the NUL-separated `environ` block holds `entry` exactly.
bool holds_entry(std::string_view environ_block, std::string_view entry) {
  size_t pos = 0;
  while (pos < environ_block.size()) {
    auto end = environ_block.find('\0', pos);
    if (end == std::string_view::npos)
      end = environ_block.size();
    if (environ_block.substr(pos, end - pos) == entry)
      return true;
    pos = end + 1;
  }
  return false;
}

bool read_environ(int dir_fd, std::string& out) {
  int fd = ::openat(dir_fd, "environ", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  out.clear();
  char buf[16384];
  while (out.size() < max_environ_bytes) {
    auto n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return true;
}

int open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  errno = ENOSYS;
  return -1;
#endif
}

// Kills `pid` once its environment was seen to hold the tag. With a pidfd
// opened before the check, a pid recycled in between is not hit.
void kill_checked(pid_t pid, int pidfd) {
#ifdef SYS_pidfd_send_signal
  if (pidfd >= 0) {
    ::syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0);
    return;
  }
#endif
  (void)pidfd;
  ::kill(pid, SIGKILL);
}

// One pass over /proc; returns how many processes were signalled.
int scan_once(const std::string& entry) {
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr)
    return 0;
  auto self = ::getpid();
  auto uid = ::geteuid();
  int killed = 0;
  std::string block;
  while (auto* de = ::readdir(proc)) {
    char* end = nullptr;
    long v = std::strtol(de->d_name, &end, 10);
    if (*end != '\0' || v <= 0 || v == self)
      continue;
    auto pid = static_cast<pid_t>(v);
    int dir_fd = ::openat(::dirfd(proc), de->d_name,
                          O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd < 0)
      continue;
    struct stat st;
    if (::fstat(dir_fd, &st) == 0 && (uid == 0 || st.st_uid == uid)
        && read_environ(dir_fd, block) && holds_entry(block, entry)) {
      // The /proc directory descriptor stays bound to the process it was
      // opened for: reading through it again after opening the pidfd
      // proves the pidfd names that same process, not a recycled pid.
      int pidfd = open_pidfd(pid);
      bool same = pidfd < 0
                  || (read_environ(dir_fd, block) && holds_entry(block, entry));
      if (same) {
        kill_checked(pid, pidfd);
        ++killed;
      }
      if (pidfd >= 0)
        ::close(pidfd);
    }
    ::close(dir_fd);
  }
  ::closedir(proc);
  return killed;
}

} // namespace

std::string new_process_tag() {
  std::random_device rd;
  char hex[33];
  std::snprintf(hex, sizeof(hex), "%08x%08x%08x%08x", rd(), rd(), rd(),
                rd());
  return std::string{process_tag_variable} + "=" + hex;
}

int kill_tagged_processes(const std::string& tag_entry) {
  int total = 0;
  for (int i = 0; i < max_scans; ++i) {
    int n = scan_once(tag_entry);
    total += n;
    if (n == 0)
      break;
  }
  return total;
}

} // namespace mibyan
