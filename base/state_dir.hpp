// File: base/state_dir.hpp
//
// Where Mibyan keeps its state ($MIBYAN_HOME) and whether a directory is
// safe for it: secrets, configuration and sessions must live in a directory
// only the current user controls (docs/security.md, "State directory").
// Thread-safe (no shared state); blocking file-system calls; never throws.
#pragma once

#include <string>

#include "base/status.hpp"

namespace mibyan {

/// Returns the current user's home directory from the password database
/// (getpwuid_r of the effective uid), or "" when it has none.
std::string passwd_home();

/// Returns the default state directory when MIBYAN_HOME is not set:
/// `$HOME/.mibyan`, else `<passwd home>/.mibyan`; "" when neither exists
/// (never a shared temporary directory).
std::string default_state_dir();

/// Succeeds when `dir` may hold Mibyan's state: it does not exist yet
/// (it will be created 0700), or it is a directory (symlinks followed)
/// owned by the effective user and not writable by group or others.
/// Otherwise fails with a one-line message naming the path, the problem
/// and the fix: permission_denied for another owner or a group- or
/// world-writable directory, invalid_argument for a non-directory, the
/// errno's code when it cannot be checked.
status check_state_dir(const std::string& dir);

} // namespace mibyan
