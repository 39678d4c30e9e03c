// File: base/pids_cgroup.hpp
//
// A best-effort per-kernel cgroup with `pids.max`, for where RLIMIT_NPROC
// cannot help: Linux never applies RLIMIT_NPROC to uid 0. Used when this
// process may create a cgroup under its own pids cgroup (root, or a
// delegated subtree): cgroup v1's `pids` hierarchy, or cgroup v2 when this
// process sits in the root cgroup. Elsewhere nothing happens and the
// rlimit is the only bound (docs/security.md).
//
// Thread safety: all functions are thread-safe; they block briefly on
// cgroupfs.
#pragma once

#include <cstdint>
#include <string>

namespace mibyan {

struct pids_cgroup {
  /// The cgroup's directory ("" when none could be made).
  std::string dir;
  /// Open `cgroup.procs` (O_WRONLY, CLOEXEC), for the child to join with
  /// join_pids_cgroup(); -1 when none.
  int procs_fd = -1;
};

/// Makes a cgroup named `name` with `pids.max = max`. Returns an empty dir
/// when cgroups are not writable here.
pids_cgroup make_pids_cgroup(const std::string& name, uint64_t max);

/// Moves the calling process into the cgroup. Async-signal-safe (for the
/// child between fork and exec).
bool join_pids_cgroup(int procs_fd) noexcept;

/// Closes the descriptor (parent side, after the fork).
void close_pids_cgroup_fd(pids_cgroup& cg);

/// Kills (SIGKILL) every process still in the cgroup and removes it,
/// retrying for up to `wait_ms` milliseconds while it is busy.
void remove_pids_cgroup(const std::string& dir, int wait_ms = 2000);

/// Whether make_pids_cgroup() works here (probed once).
bool pids_cgroup_available();

} // namespace mibyan
