#include "tools/file_lock.hpp"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

namespace mibyan {

file_lock::file_lock(const std::string& path, const std::string& what) {
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd_ < 0) {
    error_ = "cannot open the lock file for " + what + ": "
             + std::strerror(errno);
    return;
  }
  while (::flock(fd_, LOCK_EX) != 0) {
    if (errno == EINTR)
      continue;
    error_ = "cannot lock " + what + ": " + std::strerror(errno);
    ::close(fd_);
    fd_ = -1;
    return;
  }
}

file_lock::~file_lock() {
  if (fd_ >= 0) {
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }
}

} // namespace mibyan
