// File: base/host_hardening.hpp
//
// Process-wide protections of the host against the scripts it runs and
// against other local users (docs/security.md):
//   * PR_SET_DUMPABLE 0: /proc/PID/mem, environ, maps and ptrace of the
//     host are closed to processes of the same user without
//     CAP_SYS_PTRACE;
//   * SIGPIPE, SIGHUP and SIGUSR1 ignored when their action is the default
//     (an embedding application's own handlers are left alone);
//   * SIGTERM and SIGQUIT, when at their default, run the registered
//     termination hooks (on a dedicated thread, so they may lock and
//     allocate) and then end the process by the same signal;
//   * `become_subreaper` makes orphaned descendants (double-forked
//     daemons) children of this process, so they can be found and reaped.
//
// Thread safety: all functions are thread-safe and idempotent.
#pragma once

#include <functional>

namespace mibyan {

/// Applies the protections above once per process.
void harden_host_process();

/// PR_SET_CHILD_SUBREAPER on this process.
void become_subreaper();

/// Adds `hook`, run when SIGTERM or SIGQUIT ends the process. Hooks run in
/// registration order and must not wait long.
void add_termination_hook(std::function<void()> hook);

/// Called by a host's main before it returns: when SIGTERM or SIGQUIT
/// arrived, waits for the watcher to run the hooks and end the process by
/// that signal (the hooks may have ended the work main was waiting for, so
/// main can get here first). Returns at once when no such signal arrived.
/// Never returns otherwise: after 30 s it exits with 128 + the signal.
void finish_termination();

} // namespace mibyan
