// File: tests/support/process.hpp
//
// Runs a child process (usually the `mibyan` binary) to completion and
// captures its stdout, stderr and exit status. For end-to-end CLI tests.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace mibyan::test {

struct process_result {
  std::string out;
  std::string err;
  int exit_code = -1;  // -N when killed by signal N
};

struct process_options {
  /// Bytes written to the child's stdin (then closed).
  std::string input;
  /// Variables set (or, with an empty value and `unset`, removed) on top of
  /// the current environment.
  std::map<std::string, std::string> env;
  std::vector<std::string> unset;
  /// Working directory ("" = inherit).
  std::string cwd;
  /// Seconds before the child is killed with SIGKILL.
  int timeout_seconds = 120;
  /// Called on the caller's thread right after the fork, with the child's
  /// pid (also its process group). For tests that signal the child: a
  /// lookup by command line can find another suite's process under ctest -j.
  std::function<void(int)> on_started;
};

/// A long-running child a test started (a node, a server): killed with
/// SIGKILL and reaped when this goes, unless `stop` reaped it first.
struct child_process {
  int pid = -1;

  child_process() = default;
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;
  ~child_process();

  /// Sends `sig` and waits up to 60 s for the exit: the exit code (-N when
  /// killed by signal N), or `no_exit` when it is still running.
  int stop(int sig = 15, int no_exit = -1);
};

/// Runs argv[0] (looked up on PATH if it has no slash) with `argv`.
process_result run_process(const std::vector<std::string>& argv,
                           const process_options& opts = {});

/// Runs the mibyan binary built alongside the tests.
process_result run_mibyan(const std::vector<std::string>& args,
                          const process_options& opts = {});

} // namespace mibyan::test
