// File: kernels/staging_dirs.hpp
//
// Names of kernel staging dirs and the sweep of stale ones. A staging dir
// is `$TMPDIR/mibyan_kernel_<pid>_<start>_XXXXXX`: the pid of the host
// process that made it and that process's start time (clock ticks after
// boot, /proc/<pid>/stat field 22), so a dir whose host died without
// cleaning up (kill -9) is recognised even after the pid was reused. The
// runtime sweeps such dirs at start-up (runtime/runtime.cpp).
//
// Linux only (reads /proc). Thread-safe (no shared state); blocking file
// system work: call at start-up or from blocking-work threads.
#pragma once

#include <cstdint>
#include <string>

#include <sys/types.h>

namespace mibyan {

/// The directory staging dirs are made in: $TMPDIR, else /tmp.
std::string staging_base();

/// The start time of process `pid` in clock ticks after boot, or 0 when
/// there is no such process (or /proc cannot tell).
uint64_t process_start_time(pid_t pid);

/// "<staging_base()>/mibyan_kernel_<pid>_<start>_XXXXXX" for this process:
/// a mkdtemp template.
std::string staging_dir_template();

/// Removes the staging dirs in `base` (default staging_base()) that this
/// user owns and whose host process is gone: no process with the pid, or
/// one with another start time. Dirs of live hosts (this process
/// included), dirs of other users, symlinks and names of another form are
/// left alone. Returns the number of dirs removed.
size_t sweep_stale_staging_dirs(const std::string& base = {});

} // namespace mibyan
