// File: tests/support/cli_child.hpp
//
// What the CLI suites (chat, run, batch, approvals, checkpoints, context
// prompts, agent tools, background agents) share to start the `mibyan`
// binary: the environment of a run under a test's $MIBYAN_HOME, and a CLI
// started with a pipe as stdin for suites that type into a running chat.
#pragma once

#include <string>
#include <sys/types.h>
#include <utility>
#include <vector>

#include "tests/support/process.hpp"

namespace mibyan::test {

/// Options of a CLI run with MIBYAN_HOME=`home`: the provider keys
/// (OPENAI, OPENROUTER, ANTHROPIC, CUSTOM) and MIBYAN_LOG_LEVEL of the
/// caller's environment removed, killed after `timeout_seconds`.
process_options cli_options(const std::string& home, int timeout_seconds);

/// In a forked child, after its own redirections: sets MIBYAN_HOME=`home`
/// (left as it is when `home` is empty), removes OPENAI_API_KEY,
/// CUSTOM_API_KEY and MIBYAN_LOG_LEVEL, and executes the mibyan binary with
/// `args`. Never returns (exit status 127 when the exec fails).
[[noreturn]] void exec_cli(const std::string& home,
                           const std::vector<std::string>& args);

/// Forks the mibyan binary with `args`, MIBYAN_HOME=`home` (OPENAI_API_KEY,
/// CUSTOM_API_KEY and MIBYAN_LOG_LEVEL removed), a pipe as stdin (its write
/// end in `*in`), stdout to `out_path` and stderr to `err_path` (both
/// created 0600). Returns the child's pid; the caller closes `*in` and
/// reaps the child.
pid_t spawn_cli(const std::vector<std::string>& args, const std::string& home,
                const std::string& out_path, const std::string& err_path,
                int* in);

/// The mibyan binary on a pseudo-terminal (forkpty), for suites that drive
/// the interactive chat: what it printed so far is in `seen`. Killed and
/// reaped when this goes, unless finish() reaped it.
struct cli_pty {
  pid_t pid = -1;
  int master = -1;
  std::string seen;

  /// Starts mibyan with `args` and the variables `env` set (then as
  /// exec_cli: the provider keys removed).
  cli_pty(const std::vector<std::string>& args,
          const std::vector<std::pair<std::string, std::string>>& env);
  ~cli_pty();
  cli_pty(const cli_pty&) = delete;
  cli_pty& operator=(const cli_pty&) = delete;

  /// Reads what is available for up to `ms` into `seen`.
  void pump(int ms);
  /// Waits (at most 30 s) until `part` occurs `times` times in `seen`.
  bool wait_for(const std::string& part, size_t times = 1);
  /// Types `text` (all of it, or the test fails).
  void send(const std::string& text);
  /// Sends end of input (^D) and waits (at most 30 s) for the exit: the
  /// exit status, -1 when killed by a signal, -2 when still running.
  int finish();
};

} // namespace mibyan::test
