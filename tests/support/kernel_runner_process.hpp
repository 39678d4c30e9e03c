// File: tests/support/kernel_runner_process.hpp
//
// Drives a real mibyan_kernel_runner.py process the way the kernel actor
// will: own session and process group, piped stdin/stdout/stderr, the read
// end of a watchdog pipe as fd 3, a chosen environment. Writes cell lines
// and parses reply frames from stdout (bytes before a marker are fd-level
// output). Not thread-safe; one test thread drives one process.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

#include "base/json.hpp"

namespace mibyan::test {

/// One reply frame, or why none was read.
struct runner_frame {
  /// fd-level stdout bytes that arrived before the marker.
  std::string raw;
  /// The frame body as received.
  std::string body_text;
  /// The parsed body (null when `ok` is false).
  json::value body;
  /// True when a complete frame with a JSON object body was read.
  bool ok = false;
  /// "eof", "timeout", "bad-length" or "bad-json" when `ok` is false.
  std::string error;

  /// Shortcuts into `body`.
  std::string status() const { return body.get_string("status", ""); }
  std::string out() const { return body.get_string("stdout", ""); }
  std::string err() const { return body.get_string("stderr", ""); }
  std::string trace() const { return body.get_string("traceback", ""); }
};

struct runner_spawn_options {
  /// Interpreter (looked up on PATH when it has no slash).
  std::string python = "python3";
  /// Path of mibyan_kernel_runner.py.
  std::string runner;
  /// Working directory of the runner.
  std::string cwd;
  /// The complete environment ("NAME=value").
  std::vector<std::string> env;
  /// Pass the read end of a watchdog pipe as fd 3.
  bool watchdog = true;
  /// Written into a pipe whose read end is fd 4 in the child (the reply
  /// sentinel, docs/kernel_protocol.md); empty passes no pipe.
  std::string sentinel;
};

/// Fd number of the watchdog read end in the child.
constexpr int runner_watchdog_fd = 3;
/// Fd number of the sentinel pipe's read end in the child.
constexpr int runner_sentinel_fd = 4;

class runner_process {
public:
  /// Spawns the runner; throws std::runtime_error when fork/pipe fail.
  explicit runner_process(const runner_spawn_options& opts);
  /// Kills the process group with SIGKILL and reaps the child.
  ~runner_process();
  runner_process(const runner_process&) = delete;
  runner_process& operator=(const runner_process&) = delete;

  pid_t pid() const { return pid_; }

  /// Writes `line` plus "\n" to stdin. Returns false on a write error.
  bool send_line(const std::string& line);

  /// Reads the next frame marked with `sentinel`.
  runner_frame read_frame(const std::string& sentinel,
                          std::chrono::milliseconds timeout
                          = std::chrono::seconds(30));

  /// Sends `{"id": "cell-<n>", "code": code}` and reads its frame.
  runner_frame run(const std::string& sentinel, const std::string& code,
                   std::chrono::milliseconds timeout
                   = std::chrono::seconds(30));

  /// Returns the fd-level stderr collected so far.
  const std::string& err_text() const { return err_; }

  /// Reads stdout until EOF (or timeout) and returns what arrived.
  std::string drain_stdout(std::chrono::milliseconds timeout);

  /// Closes the host's (write) end of the watchdog pipe.
  void close_watchdog();

  /// Writes the "end the cell" byte ('K') to the watchdog pipe.
  bool kill_cell();

  /// Closes the runner's stdin.
  void close_stdin();

  /// Waits for the child to exit. Returns its exit code (-N when killed by
  /// signal N), or nullopt on timeout.
  std::optional<int> wait_exit(std::chrono::milliseconds timeout);

private:
  // Polls stdout and stderr once; returns false on timeout.
  bool pump(int timeout_ms);

  pid_t pid_ = -1;
  int in_ = -1;
  int out_ = -1;
  int errfd_ = -1;
  int watchdog_ = -1;
  bool out_eof_ = false;
  bool reaped_ = false;
  int exit_code_ = 0;
  int cells_ = 0;
  std::string buf_;
  std::string err_;
};

/// Returns a fresh `@@MIBYAN-KERNEL-<random>@@` sentinel.
std::string make_kernel_sentinel();

/// Returns the path of kernels/mibyan_kernel_runner.py in the source tree.
std::string kernel_runner_path();

/// Returns the current process environment as "NAME=value" entries.
std::vector<std::string> current_environment();

/// Returns true while `pid` exists and is not a zombie.
bool process_alive(pid_t pid);

} // namespace mibyan::test
