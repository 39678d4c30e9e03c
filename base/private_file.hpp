// File: base/private_file.hpp
//
// Files only the current user may read: spill files, cached pages, kernel
// staging files. Never follows a symlink at the final path component.
// Thread-safe (no shared state); blocking file I/O, so call from tool
// worker threads or start-up code, not from actor handlers on hot paths.
#pragma once

#include <string>
#include <string_view>

#include "base/status.hpp"

namespace mibyan {

/// Creates `dir` and its missing parents with mode 0700. On failure the
/// message names the component that failed; the code follows its errno
/// (base/errno_status.hpp), or is invalid_argument when `dir` exists but
/// is not a directory.
status make_private_dirs(const std::string& dir);

/// Writes `data` to `path` with mode 0600. With `exclusive`, fails when the
/// path exists (O_EXCL); otherwise replaces the content. On failure the
/// partial file is removed. The failure's code follows errno
/// (already_exists for an existing path with `exclusive`).
status write_private_file(const std::string& path, std::string_view data,
                          bool exclusive = false);

} // namespace mibyan
