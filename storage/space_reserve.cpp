#include "storage/space_reserve.hpp"

#include <cerrno>
#include <cstring>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace mibyan {

std::string reserve_path(const std::string& dir) {
  return dir + "/reserve";
}

std::string ensure_reserve(const std::string& dir, uint64_t bytes) {
  auto path = reserve_path(dir);
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)
      && static_cast<uint64_t>(st.st_blocks) * 512 >= bytes)
    return {};
  ::unlink(path.c_str()); // wrong type, short or sparse: start over
  int fd = ::open(path.c_str(),
                  O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    return "cannot create " + path + ": " + std::strerror(errno);
  int rc = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (rc == EOPNOTSUPP || rc == EINVAL) {
    // No fallocate on this file system: write the blocks out.
    std::vector<char> zeros(1 << 16, '\0');
    rc = 0;
    for (uint64_t done = 0; rc == 0 && done < bytes;) {
      auto n = ::write(fd, zeros.data(),
                       static_cast<size_t>(std::min<uint64_t>(
                         zeros.size(), bytes - done)));
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        rc = n < 0 ? errno : EIO;
      else
        done += static_cast<uint64_t>(n);
    }
  }
  if (rc == 0 && ::fsync(fd) != 0)
    rc = errno;
  ::close(fd);
  if (rc != 0) {
    ::unlink(path.c_str());
    return "cannot reserve " + std::to_string(bytes) + " bytes in " + path
           + ": " + std::strerror(rc);
  }
  return {};
}

void release_reserve(const std::string& dir) {
  ::unlink(reserve_path(dir).c_str());
}

} // namespace mibyan
