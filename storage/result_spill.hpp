// File: storage/result_spill.hpp
//
// Where the full text of an oversized tool result is kept (docs/security.md,
// "Oversized tool results"): `$MIBYAN_HOME/cache/results/<session>/`, one
// file per result, private to the user and removed with the session.
//
// Guarantees: every directory from `cache/` down is created 0700 and must
// be a real directory (not a symlink) owned by the current user without
// group/other write access, else nothing is written. Files are 0600,
// created with O_CREAT|O_EXCL|O_NOFOLLOW under an unpredictable name, so a
// planted file or symlink is never written through and two sessions (or
// two calls with the same id) never share a file.
//
// Thread safety: no shared state. Blocking file I/O.
#pragma once

#include <string>
#include <string_view>

#include "storage/store_result.hpp"

namespace mibyan {

/// `<home>/cache/results`.
std::string spill_root(const std::string& home);

/// The directory of one session's spilled results (the session id is
/// encoded so it can never leave the root).
std::string spill_dir(const std::string& home, const std::string& session_id);

/// Saves `text`, the result of call `call_id` of session `session_id`, and
/// returns the file's path. Errors: `home` empty, a directory that is not
/// private (see above), or the write failed.
store_result<std::string> spill_result(const std::string& home,
                                       const std::string& session_id,
                                       const std::string& call_id,
                                       std::string_view text);

/// Removes every spilled result of `session_id` (missing: success).
/// Symlinks inside are removed, never followed.
store_status remove_spilled_results(const std::string& home,
                                    const std::string& session_id);

} // namespace mibyan
