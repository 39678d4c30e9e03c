// File: kernels/kernel_process.hpp
//
// Starting and stopping one Python kernel process (CAF-free). The actor
// that owns a kernel (actors/kernel.hpp) adopts the descriptors returned
// here into a broker.
//
// Layout: a private staging dir `$TMPDIR/mibyan_kernel_<pid>_<start>_XXXXXX`
// (0700, kernels/staging_dirs.hpp) holds
// the runner, the generated `mibyan_tools.py` and the RPC socket `rpc.sock`
// (0600). The child runs in its own session and process group with stdin,
// stdout and stderr on socketpairs, the read end of the watchdog pipe on
// fd 3, the read end of the sentinel pipe on fd 4 (docs/kernel_protocol.md)
// and a scrubbed environment.
//
// With a sandbox (`bwrap` set) the child is bwrap, started with the
// scrubbed environment, which runs the interpreter in new PID/IPC/UTS
// namespaces with the filesystem view of base/sandbox.hpp; killing it
// ends every process the script started. Without one (the fallback,
// docs/security.md) the kernel runs directly and `end_kernel_processes`
// hunts its whole process tree at teardown. Resource limits apply in both.
#pragma once

#include <string>
#include <vector>

#include <sys/types.h>

#include "kernels/stub_generator.hpp"
#include "base/sandbox.hpp"
#include "base/status.hpp"

namespace mibyan {

struct kernel_spawn_options {
  /// Interpreter to run (absolute path or a name looked up on PATH).
  std::string python = "python3";
  /// Working directory; empty means the staging dir (strict mode).
  std::string cwd;
  /// Tools the stub exposes: the names among `specs` to render.
  std::vector<std::string> tools;
  /// Inherited environment ("NAME=value"), scrubbed here.
  std::vector<std::string> inherited_env;
  /// Exact names re-allowed past the secret filter.
  std::vector<std::string> passthrough;
  /// Seconds the stub waits for one tool reply.
  double rpc_timeout = 300;
  /// The stub functions available (built-in, host and MCP tools, see
  /// generate_stub); those named in `tools` are rendered.
  std::vector<script_tool_spec> specs;
  /// Path of bwrap; empty runs the kernel without a sandbox.
  std::string bwrap;
  /// Strict view (only the staging dir writable, no network) instead of
  /// the project view (cwd writable).
  bool strict = false;
  /// `$MIBYAN_HOME`, hidden from the script.
  std::string home;
  /// Resource limits of the kernel and everything it starts.
  sandbox_limits limits;
};

struct kernel_process {
  pid_t pid = -1;
  int stdin_fd = -1;     // host end, write cells
  int stdout_fd = -1;    // host end, raw output + frames
  int stderr_fd = -1;    // host end, raw stderr
  int rpc_fd = -1;       // listening Unix socket
  int watchdog_fd = -1;  // write end; closing it ends the kernel
  std::string staging_dir;
  std::string socket_path;
  std::string token;
  std::string sentinel;
  std::string cwd;       // effective working directory
  /// Names of inherited variables that were not passed to the child.
  std::vector<std::string> dropped_env;
  /// The kernel runs inside bwrap (pid is bwrap's).
  bool sandboxed = false;
  /// Value of MIBYAN_KERNEL_ID in the kernel's environment: identifies
  /// its processes at teardown when there is no sandbox.
  std::string marker;
  /// The kernel's pids cgroup (base/pids_cgroup.hpp); "" for none.
  std::string cgroup_dir;
};

/// Starts a kernel. On failure leaves nothing behind (descriptors closed,
/// staging dir removed) and says why: not_found or permission_denied when
/// the interpreter cannot be started, unavailable for a failed system call
/// (a full descriptor table, a staging dir that cannot be made).
result<kernel_process> spawn_kernel(const kernel_spawn_options& opts);

/// Sends `sig` to the kernel's process group (and the process itself).
void signal_kernel(pid_t pid, int sig);

/// Kills everything the kernel started: its process group (`pid` > 0 only
/// while the kernel is not yet reaped, else pass -1), and without a
/// sandbox every process still carrying its marker and their descendants
/// (a double-forked daemon that left the group), reaping those that were
/// re-parented to this process; then everything left in `cgroup_dir`,
/// which is removed. Blocking (reads /proc, waits for the killed children
/// briefly): call off the scheduler and the epoll thread.
void end_kernel_processes(pid_t pid, bool sandboxed, const std::string& marker,
                          const std::string& cgroup_dir = {});

/// Kills every kernel this process started that is still registered,
/// removes their staging dirs, and hunts the daemons of unsandboxed ones.
/// For the termination path (SIGTERM); blocks for a few milliseconds.
void end_all_kernels_now();

/// Non-blocking reap; returns true once the process is gone (reaped now or
/// earlier). Stores the wait status in `*status` when reaped now.
bool reap_kernel(pid_t pid, int* status);

/// Closes the descriptors that are still open (>= 0) and sets them to -1.
void close_kernel_fds(kernel_process& k);

/// Removes the staging dir (refusing to follow symlinks).
void remove_staging_dir(const std::string& dir);

/// Returns `n` random bytes, URL-safe base64 encoded without padding.
std::string random_token(size_t n);

/// Returns the interpreter to start kernels with for `python` (a name or a
/// path): when it resolves to a script (a wrapper such as a pyenv shim,
/// which costs tens of milliseconds per start and may read stdin), the real
/// executable it runs (`sys.executable`); otherwise the resolved path.
/// Returns `python` unchanged when it cannot be resolved. Blocking (runs
/// the wrapper once, 5 s limit); call at start-up, off the scheduler.
std::string resolve_interpreter(const std::string& python);

/// Returns whether `python` runs and is Python >= 3.8 (probes with a 5 s
/// limit; blocking, call off the scheduler).
bool probe_python(const std::string& python);

} // namespace mibyan
