// File: base/subprocess.hpp
//
// A blocking, CAF-free child-process runner for tools. It runs on the
// calling thread (a runtime-owned blocking thread, never a CAF scheduler
// thread) and returns when the child is done, timed out, was cancelled or
// was stopped by the output callback.
//
// The child is started with posix_spawn (safe in a multi-threaded process)
// as the leader of a new process group, with an empty signal mask and all
// signal dispositions reset to default. Stopping it always targets the whole
// group: SIGTERM, then SIGKILL after a grace period. The child is always
// reaped; no zombies are left behind.
//
// Output is read through pipes with poll(). Memory is bounded: each stream
// keeps its first 40 % and last 60 % of `max_output_bytes` while counting
// the total (see base/head_tail_buffer.hpp).
//
// Background grandchildren (`sleep 100 &`) inherit the output pipe and can
// keep it open after the main child exited. The runner does not wait for
// them: once the main child exited it drains what is immediately available,
// stops after `drain_quiet` without data or `drain_max` in total, and (only
// when `kill_group_on_exit` is set) kills what is left of the group.
//
// Thread safety: run_subprocess may be called concurrently from any number
// of threads. All descriptors it creates are close-on-exec, so concurrent
// spawns do not leak them into each other's children.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mibyan {

/// Which output stream a chunk came from.
enum class output_stream { out, err };

struct subprocess_options {
  /// The program and its arguments. argv[0] is looked up on PATH when it
  /// contains no slash. Ignored when `shell_command` is non-empty.
  std::vector<std::string> argv;
  /// When non-empty, runs `/bin/bash -c shell_command` (or `/bin/sh -c` when
  /// bash is missing) instead of argv.
  std::string shell_command;
  /// Working directory of the child ("" = inherit). A missing directory
  /// makes the spawn fail (see subprocess_result::spawn_error).
  std::string cwd;
  /// The child's environment as "NAME=value" strings; nullopt inherits the
  /// current process environment.
  std::optional<std::vector<std::string>> env;
  /// Bytes written to the child's stdin, which is then closed. When empty,
  /// stdin is /dev/null.
  std::string stdin_data;
  /// Wall-clock limit; zero means none.
  std::chrono::milliseconds timeout{0};
  /// Time between SIGTERM and SIGKILL after a timeout.
  std::chrono::milliseconds kill_grace{5000};
  /// Time between SIGTERM and SIGKILL after cancellation (short: a cancelled
  /// caller must return quickly).
  std::chrono::milliseconds cancel_grace{100};
  /// Polled at least every 50 ms; when it becomes true the group is stopped
  /// and the result has `cancelled` set. May be null.
  const std::atomic<bool>* cancel = nullptr;
  /// Send stderr into the same pipe as stdout, preserving the order in which
  /// the child wrote them. The result's `err` stays empty.
  bool merge_stderr = true;
  /// Bytes kept per stream (head 40 % + tail 60 %). Zero keeps nothing (the
  /// callback still sees everything).
  size_t max_output_bytes = 1 << 20;
  /// Called with every chunk read, in order, before it is stored. Returning
  /// false stops the child (SIGKILL to the group) and sets `stopped`.
  std::function<bool(output_stream, std::string_view)> on_output;
  /// After the main child exited: stop reading once no data arrived for
  /// this long...
  std::chrono::milliseconds drain_quiet{100};
  /// ...or this long after the exit in total.
  std::chrono::milliseconds drain_max{2000};
  /// Kill (SIGKILL) processes left in the group after the main child exited
  /// normally. Off by default: a command may start a daemon on purpose.
  bool kill_group_on_exit = false;
  /// Also kill, when the run ends for any reason, the processes that left
  /// the group (setsid, `set -m`, double forks): the child's environment
  /// gets a per-run MIBYAN_PROCESS_TAG variable, and every process of this
  /// user still carrying it is killed (base/process_sweep.hpp). Implies
  /// kill_group_on_exit. For foreground commands whose leftovers must not
  /// outlive the call; a program that clears its environment escapes it.
  bool kill_leftovers = false;
};

struct subprocess_result {
  /// Empty when the child started; otherwise why it did not (e.g.
  /// "No such file or directory: nosuchprogram"). All other fields are then
  /// meaningless except `duration`.
  std::string spawn_error;
  /// Exit status. A child killed by signal N reports 128 + N (the shell
  /// convention) and sets `term_signal` to N. -1 if unknown.
  int exit_code = -1;
  /// The signal that terminated the child, or 0.
  int term_signal = 0;
  /// The timeout expired and the group was killed.
  bool timed_out = false;
  /// The cancel flag was raised and the group was killed.
  bool cancelled = false;
  /// The output callback asked to stop and the group was killed.
  bool stopped = false;
  /// Kept output (stdout, or merged stdout + stderr): head + tail when
  /// truncated, see `out_omitted`.
  std::string out_head;
  std::string out_tail;
  /// Total bytes the child wrote to stdout (+ stderr when merged) and the
  /// number of them dropped between head and tail.
  uint64_t out_total = 0;
  uint64_t out_omitted = 0;
  /// Same for stderr when not merged.
  std::string err_head;
  std::string err_tail;
  uint64_t err_total = 0;
  uint64_t err_omitted = 0;
  /// The child's pid, which is also its process group id.
  int pid = -1;
  /// Wall-clock time from spawn to return.
  std::chrono::milliseconds duration{0};

  /// Returns out_head + out_tail (the whole output when out_omitted == 0).
  std::string out() const { return out_head + out_tail; }
  /// Returns err_head + err_tail.
  std::string err() const { return err_head + err_tail; }
};

/// Runs a child process to completion as described in `opts`. Never throws
/// (allocation failure aside); failures to start are reported in
/// `spawn_error`.
subprocess_result run_subprocess(const subprocess_options& opts);

/// Returns the path of the first executable `name` on `$PATH`, or "" when
/// there is none. A name containing a slash is returned if executable.
std::string find_executable(std::string_view name);

} // namespace mibyan
