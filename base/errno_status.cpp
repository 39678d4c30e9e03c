#include "base/errno_status.hpp"

#include <cerrno>
#include <cstring>

namespace mibyan {

status_code errno_code(int err) {
  switch (err) {
    case EACCES:
    case EPERM:
    case EROFS:
      return status_code::permission_denied;
    case ENOENT:
    case ENOTDIR:
      return status_code::not_found;
    case EEXIST:
      return status_code::already_exists;
    case ENOSPC:
    case EDQUOT:
    case EMFILE:
    case ENFILE:
    case ENOMEM:
    case EFBIG:
      return status_code::resource_exhausted;
    case EAGAIN:
    case EBUSY:
    case EINTR:
    case EADDRINUSE:
    case EADDRNOTAVAIL:
      return status_code::unavailable;
    case ETIMEDOUT:
      return status_code::timeout;
    case EINVAL:
    case ENAMETOOLONG:
    case ELOOP:
    case EISDIR:
      return status_code::invalid_argument;
    default:
      return status_code::internal;
  }
}

status errno_status(int err, const std::string& what) {
  return status::failure(errno_code(err), what + ": " + std::strerror(err));
}

} // namespace mibyan
