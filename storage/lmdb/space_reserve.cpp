#include "storage/lmdb/space_reserve.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

namespace mibyan {

namespace {

constexpr uint64_t mib = uint64_t{1} << 20;
constexpr uint64_t reserve_min = uint64_t{8} * mib;
constexpr uint64_t reserve_max = uint64_t{64} * mib;
constexpr uint64_t reserve_floor = uint64_t{64} << 10;
constexpr const char* tmp_prefix = "reserve.";
constexpr const char* tmp_suffix = ".tmp";

uint64_t allocated(const struct stat& st) {
  return static_cast<uint64_t>(st.st_blocks) * 512;
}

// Allocates blocks for [from, bytes) of `fd`: posix_fallocate, or writing
// zeros where the file system has no fallocate. Returns 0 or an errno.
int allocate(int fd, uint64_t from, uint64_t bytes) {
  if (bytes <= from)
    return 0;
  int rc = ::posix_fallocate(fd, static_cast<off_t>(from),
                             static_cast<off_t>(bytes - from));
  if (rc != EOPNOTSUPP && rc != EINVAL)
    return rc;
  std::vector<char> zeros(1 << 16, '\0');
  for (uint64_t done = from; done < bytes;) {
    auto n = ::pwrite(fd, zeros.data(),
                      static_cast<size_t>(std::min<uint64_t>(zeros.size(),
                                                             bytes - done)),
                      static_cast<off_t>(done));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return n < 0 ? errno : EIO;
    done += static_cast<uint64_t>(n);
  }
  return 0;
}

// Removes `reserve.<pid>.tmp` files whose process is gone (a crash while
// allocating).
void sweep_stale(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr)
    return;
  const std::string prefix = tmp_prefix, suffix = tmp_suffix;
  while (auto* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.size() <= prefix.size() + suffix.size()
        || name.compare(0, prefix.size(), prefix) != 0
        || name.compare(name.size() - suffix.size(), suffix.size(), suffix)
             != 0)
      continue;
    auto digits = name.substr(prefix.size(),
                              name.size() - prefix.size() - suffix.size());
    char* end = nullptr;
    long pid = std::strtol(digits.c_str(), &end, 10);
    if (digits.empty() || *end != '\0' || pid <= 0)
      continue;
    if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
      ::unlinkat(::dirfd(d), name.c_str(), 0);
  }
  ::closedir(d);
}

} // namespace

uint64_t reserve_size(uint64_t store_bytes, uint64_t fs_bytes) {
  uint64_t size = std::max(reserve_min, store_bytes / 16);
  size = std::min(size, reserve_max);
  if (fs_bytes > 0)
    size = std::min(size, fs_bytes / 4);
  size = std::max(size, reserve_floor);
  return (size + 4095) / 4096 * 4096;
}

uint64_t reserve_size_for(const std::string& dir) {
  struct stat st;
  uint64_t store = 0;
  if (::stat((dir + "/data.mdb").c_str(), &st) == 0)
    store = allocated(st);
  struct statvfs vs;
  uint64_t fs = 0;
  if (::statvfs(dir.c_str(), &vs) == 0)
    fs = static_cast<uint64_t>(vs.f_blocks) * vs.f_frsize;
  return reserve_size(store, fs);
}

bool space_is_short(const std::string& dir) {
  struct statvfs vs;
  if (::statvfs(dir.c_str(), &vs) != 0)
    return true;
  auto free = static_cast<uint64_t>(vs.f_bavail) * vs.f_frsize;
  return free < 2 * reserve_size_for(dir);
}

std::string reserve_path(const std::string& dir) {
  return dir + "/reserve";
}

std::string ensure_reserve(const std::string& dir, uint64_t bytes) {
  if (bytes == 0)
    bytes = reserve_size_for(dir);
  auto path = reserve_path(dir);
  sweep_stale(dir);
  struct stat st;
  bool exists = ::lstat(path.c_str(), &st) == 0;
  if (exists && S_ISREG(st.st_mode) && allocated(st) >= bytes)
    return {};
  if (exists && S_ISREG(st.st_mode)) {
    // Grow in place: the blocks it has stay reserved whatever happens.
    int fd = ::open(path.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
      return "cannot open " + path + ": " + std::strerror(errno);
    int rc = allocate(fd, 0, bytes);
    if (rc == 0 && ::fsync(fd) != 0)
      rc = errno;
    ::close(fd);
    if (rc != 0)
      return "cannot grow " + path + " to " + std::to_string(bytes)
             + " bytes: " + std::strerror(rc);
    return {};
  }
  if (exists)
    ::unlink(path.c_str());  // not a regular file: replace it
  auto tmp = dir + "/" + tmp_prefix + std::to_string(::getpid()) + tmp_suffix;
  ::unlink(tmp.c_str());
  int fd = ::open(tmp.c_str(),
                  O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    return "cannot create " + tmp + ": " + std::strerror(errno);
  int rc = allocate(fd, 0, bytes);
  if (rc == 0 && ::fsync(fd) != 0)
    rc = errno;
  ::close(fd);
  if (rc == 0 && ::rename(tmp.c_str(), path.c_str()) != 0)
    rc = errno;
  if (rc != 0) {
    ::unlink(tmp.c_str());
    return "cannot reserve " + std::to_string(bytes) + " bytes in " + path
           + ": " + std::strerror(rc);
  }
  return {};
}

void release_reserve(const std::string& dir) {
  ::unlink(reserve_path(dir).c_str());
}

} // namespace mibyan
