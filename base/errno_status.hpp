// File: base/errno_status.hpp
//
// The status of a failed system call: its errno chosen into a status_code
// (base/status.hpp) in one place, so callers of file and process helpers
// branch on the code, never on strerror's text. Thread-safe; no state.
#pragma once

#include <string>

#include "base/status.hpp"

namespace mibyan {

/// The status code for errno value `err`: EACCES, EPERM and EROFS are
/// permission_denied; ENOENT and ENOTDIR not_found; EEXIST already_exists;
/// ENOSPC, EDQUOT, EMFILE, ENFILE, ENOMEM and EFBIG resource_exhausted;
/// EAGAIN, EBUSY, EINTR, EADDRINUSE and EADDRNOTAVAIL unavailable; ETIMEDOUT timeout; EINVAL,
/// ENAMETOOLONG, ELOOP and EISDIR invalid_argument; EIO data_corrupt is NOT
/// assumed (a device error is internal). Anything else, and 0, is internal.
status_code errno_code(int err);

/// A failed status with errno_code(err) and the message
/// "<what>: <strerror(err)>".
status errno_status(int err, const std::string& what);

} // namespace mibyan
