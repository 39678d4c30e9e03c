// File: base/sandbox.hpp
//
// The process sandbox of untrusted code (execute_code kernels and the
// terminal calls their scripts make), built on bubblewrap (`bwrap`). CAF-free.
// What each mode guarantees, and the fallback, are described in
// docs/security.md.
//
// A sandboxed command runs as
//   bwrap --die-with-parent --unshare-pid --unshare-ipc --unshare-uts
//         --new-session --cap-drop ALL --ro-bind / / --dev /dev --proc /proc
//         --tmpfs /tmp
//         <mounts from the policy> --chdir WORKDIR [--unshare-net] -- CMD...
// after which /proc/sys, /proc/sysrq-trigger, /proc/irq and /proc/bus are
// covered read-only and the session/engine sockets under /run are hidden
// (all of /run in strict mode). bwrap's own process (and its PID 1 inside
// the namespace) keep the
// environment they were started with, so callers start bwrap with the
// scrubbed environment, never the host's.
//
// Resource limits are applied in the forked child before exec (they are
// inherited by bwrap and everything inside).
//
// Thread safety: probe_sandbox() is thread-safe (runs once); the other
// functions are pure or only touch their arguments.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <sys/resource.h>

namespace mibyan {

/// `code_execution.sandbox`.
enum class sandbox_setting { automatic, required, off };

/// Parses "auto" / "required" / "off" (anything else is `automatic`).
sandbox_setting parse_sandbox_setting(const std::string& text);

/// Filesystem view of the sandbox.
enum class sandbox_view {
  /// The system read-only, the `writable` paths read-write, private /tmp.
  project,
  /// The system read-only, only the `writable` paths (the staging dir)
  /// writable, /tmp an empty read-only tmpfs, no network.
  strict,
};

struct sandbox_policy {
  sandbox_view view = sandbox_view::project;
  /// Directory the command starts in (must exist and be visible).
  std::string workdir;
  /// Directories bound read-write at the same path.
  std::vector<std::string> writable;
  /// Directories replaced by an empty tmpfs (Mibyan's state directories).
  std::vector<std::string> hidden_dirs;
  /// Files replaced by /dev/null (credential files outside hidden dirs).
  std::vector<std::string> hidden_files;
  /// Files and directories bound read-only over themselves when they
  /// exist, even inside a writable directory (shell start-up files and
  /// other persistence points, base/credential_paths.hpp). Those inside a
  /// hidden directory stay hidden.
  std::vector<std::string> readonly_paths;
  /// The user's home directory ("" = none). When a writable directory is
  /// the home or lies above it (a working directory at $HOME or /), the
  /// home itself stays read-only and only its visible entries (names not
  /// starting with '.', no symlinks) are bound read-write, so no start-up
  /// file can be created or replaced there; "/" itself is never bound
  /// read-write.
  std::string user_home;
  /// Network namespace shared with the host (false in strict mode).
  bool network = true;
};

/// Whether bwrap works here, found out once.
struct sandbox_support {
  bool available = false;
  /// Absolute path of bwrap ("" when not found).
  std::string bwrap;
  /// Why it is unavailable ("" when available).
  std::string reason;
};

/// Runs bwrap once with every namespace option the sandbox uses and caches
/// the answer for the life of the process. Blocking (up to 5 s, the first
/// time only); call at start-up, off the scheduler.
const sandbox_support& probe_sandbox();

/// Returns the argv that runs `command` (argv[0] absolute or on PATH inside
/// the sandbox) under `bwrap` with `policy`. Paths are canonicalised;
/// directories that do not exist are skipped (a missing `workdir` makes
/// bwrap fail, which the caller reports).
std::vector<std::string> sandbox_argv(const std::string& bwrap,
                                      const sandbox_policy& policy,
                                      const std::vector<std::string>& command);

/// Per-process resource limits (0 = leave the inherited limit).
struct sandbox_limits {
  uint64_t memory_bytes = 0;  // RLIMIT_AS
  uint64_t processes = 0;     // new processes/threads (RLIMIT_NPROC headroom)
  uint64_t open_files = 0;    // RLIMIT_NOFILE
};

/// Limits resolved before fork, so the child only calls setrlimit.
struct prepared_limits {
  bool set_as = false, set_nproc = false, set_nofile = false;
  rlimit as{}, nproc{}, nofile{};
};

/// Resolves `limits` for a child of this process. RLIMIT_NPROC counts every
/// task of the real user id, so the limit is the user's current task count
/// plus `processes`. Values are clamped to the current hard limits (an
/// unprivileged process cannot raise them). Reads /proc; blocking.
prepared_limits prepare_limits(const sandbox_limits& limits);

/// Applies prepared limits (soft = hard). Async-signal-safe: call in the
/// child between fork and exec. Returns false when one could not be set.
bool apply_limits(const prepared_limits& limits) noexcept;

/// What a sandbox hides or keeps read-only for a runtime whose home is
/// `home`: Mibyan's own state (the home, `$HOME/.mibyan`, and the files
/// named by MIBYAN_ENV / MIBYAN_CONFIG when they exist outside them); the
/// user's credential stores of base/credential_paths.hpp (directories
/// hidden by a tmpfs, files covered by /dev/null - the same list the file
/// tools refuse); the shell start-up files and persistence directories
/// (read-only); and `policy.user_home` (the resolved $HOME).
void add_state_paths(sandbox_policy& policy, const std::string& home);

/// Whether a project-mode sandbox working in `workdir` ("" = this
/// process's working directory) exposes the user's home: `workdir`,
/// resolved, is $HOME or lies above it (such as "/"). Scripts there are not
/// approved as isolated (docs/approvals.md). False without a usable $HOME.
bool workdir_contains_home(const std::string& workdir);

} // namespace mibyan
