// File: tests/support/pid_namespace.hpp
//
// Process checks that work whether a kernel runs in its own PID namespace
// (the bubblewrap sandbox) or in the test's (the fallback): a script
// reports `os.readlink('/proc/self/ns/pid')` next to its pids.
#pragma once

#include <chrono>
#include <string>

namespace mibyan::test {

/// Python expression a script prints to identify its PID namespace.
constexpr const char* py_pid_ns = "os.readlink('/proc/self/ns/pid')";

/// The test process's own PID namespace ("pid:[N]").
std::string own_pid_ns();

/// Whether some live (non-zombie) host process is in namespace `ns`.
bool pid_ns_has_processes(const std::string& ns);

/// Waits until `pid` (as seen inside `ns`) is gone: in the test's own
/// namespace that pid; in a sandbox's namespace every process of it (the
/// pid numbers there mean nothing to the host).
bool wait_gone(const std::string& ns, int pid,
               std::chrono::milliseconds limit = std::chrono::seconds(5));

/// Returns the host pid of `pid` as seen inside namespace `ns`, or -1.
int host_pid(const std::string& ns, int pid);

} // namespace mibyan::test
