#include "storage/lmdb/schema_lock.hpp"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

namespace mibyan {

std::string schema_lock::path_in(const std::string& dir) {
  return dir + "/schema.lock";
}

store_result<schema_lock> schema_lock::acquire(const std::string& dir) {
  using result = store_result<schema_lock>;
  auto path = path_in(dir);
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC,
                  0600);
  if (fd < 0) {
    int err = errno;
    bool denied = err == EACCES || err == EPERM || err == EROFS;
    return result::failure(denied ? status_code::permission_denied
                                  : status_code::internal,
                           "cannot open the schema lock " + path + ": "
                             + std::strerror(err));
  }
  schema_lock held{fd};
  while (::flock(fd, LOCK_EX) != 0) {
    if (errno != EINTR)
      return result::failure("cannot lock " + path + ": "
                             + std::strerror(errno));
  }
  return result{std::move(held)};
}

schema_lock::schema_lock(schema_lock&& other) noexcept : fd_(other.fd_) {
  other.fd_ = -1;
}

schema_lock& schema_lock::operator=(schema_lock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

schema_lock::~schema_lock() {
  if (fd_ >= 0)
    ::close(fd_);  // closing the only descriptor releases the flock
}

} // namespace mibyan
