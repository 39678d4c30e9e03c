// File: base/process_registry.hpp
//
// Background processes started by `terminal` with background=true and
// driven by the `process` tool (docs/tools.md, "Background processes").
// CAF-free; one instance per runtime.
//
// Ownership and threads:
// - Each process is started (fork + exec of `bash -c`) as the leader of its
//   own process group (its own session under a pseudo-terminal), so a kill
//   always reaches the whole group.
// - One reader thread owned by the registry epoll-waits on every process's
//   output descriptor, appends output to a rolling buffer (the last
//   `buffer_bytes` bytes) and reaps exited leaders with waitpid(WNOHANG).
//   Callers never read descriptors themselves, so no tool call blocks on a
//   child's output.
// - All member functions are thread-safe. `wait` blocks its caller (a
//   blocking-pool thread) on a condition variable; everything else returns
//   promptly (`kill` waits at most its grace period).
// - Processes belong to the session that started them: another session's
//   id is "not found". close_session() and the destructor kill (SIGTERM,
//   then SIGKILL) every group they own and reap the leaders, so no process
//   outlives its session or the runtime.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/status.hpp"

namespace mibyan {

struct process_snapshot;

/// What to start.
struct process_spec {
  /// The owning session ("" is a session like any other).
  std::string session_id;
  /// Run with /bin/bash -c (or /bin/sh -c without bash).
  std::string command;
  /// Working directory (must exist).
  std::string cwd;
  /// The environment ("NAME=value").
  std::vector<std::string> env;
  /// Run under a pseudo-terminal (stdin, stdout and stderr are its slave
  /// side); otherwise stdin is a pipe and stdout+stderr share one pipe.
  bool pty = false;
  /// Called once when the process ended on its own (exit or a signal that
  /// did not come from the registry; never after a kill by the process
  /// tool, close_session or shutdown), with its snapshot (output: the last
  /// 4,000 bytes) once its output is drained (at most 500 ms after the
  /// exit). Runs on the reader thread, outside the registry's lock: it
  /// must return promptly and never call back into the registry's waits.
  std::function<void(const process_snapshot&)> on_exit;
};

/// A snapshot of one process.
struct process_snapshot {
  std::string id;
  std::string session_id;
  std::string command;
  int pid = -1;
  bool pty = false;
  bool running = true;
  /// Valid once !running: the exit status (128 + N after signal N).
  int exit_code = -1;
  int term_signal = 0;
  /// Once !running: "exited" (own exit), "signal" (killed by a signal it
  /// did not get from us) or "killed" (by the process tool, its session
  /// closing or runtime shutdown).
  std::string completion_reason;
  /// Once !running: "process" (it ended on its own), "process_tool",
  /// "session_close" or "shutdown".
  std::string termination_source;
  double uptime_seconds = 0;
  /// Seconds since the epoch at start.
  int64_t started_at = 0;
  /// The rolling output buffer (last buffer_bytes bytes, raw).
  std::string output;
  /// Bytes of output produced in total.
  uint64_t output_total = 0;
};

class process_registry {
public:
  /// `max_processes` caps tracked processes; finished ones are forgotten
  /// (oldest first) to make room, running ones never.
  explicit process_registry(size_t max_processes = 64,
                            size_t buffer_bytes = 200000);
  ~process_registry();
  process_registry(const process_registry&) = delete;
  process_registry& operator=(const process_registry&) = delete;

  /// A process that started.
  struct started {
    std::string id; // "proc_" + 12 hex digits
    int pid = -1;
  };

  /// Starts `spec`. Fails with a clear message: resource_exhausted when
  /// `max_processes` are running, unavailable after shutdown, the errno's
  /// code when fork/exec setup fails.
  result<started> start(const process_spec& spec);

  /// Processes of `session_id`, oldest first (output left empty).
  std::vector<process_snapshot> list(const std::string& session_id);

  /// One process with its output; false when `id` is unknown to
  /// `session_id`.
  bool get(const std::string& session_id, const std::string& id,
           process_snapshot& out);

  enum class wait_result { exited, timeout, cancelled, not_found };

  /// Waits until the process exited (and its output is drained, at most
  /// 500 ms more), `timeout` passed or `*cancel` became true (polled every
  /// 50 ms; may be null).
  wait_result wait(const std::string& session_id, const std::string& id,
                   std::chrono::milliseconds timeout,
                   const std::atomic<bool>* cancel);

  /// Kills the process group: SIGTERM, then SIGKILL after `grace` if the
  /// leader is still alive. Fails with not_found for an id unknown to
  /// `session_id`. Killing an exited process is not an error.
  status kill(const std::string& session_id, const std::string& id,
                   std::chrono::milliseconds grace
                   = std::chrono::milliseconds{2000});

  /// Writes `data` to the process's stdin. Errors: not_found,
  /// invalid_argument (exited, stdin closed), the errno's code for a write
  /// failure, unavailable when the process reads nothing for 5 s.
  status write(const std::string& session_id, const std::string& id,
               const std::string& data);

  /// Closes stdin (under a PTY: sends the EOF character, Ctrl-D). Errors:
  /// not_found, the errno's code for a failed write of the EOF character.
  status close_stdin(const std::string& session_id, const std::string& id);

  /// Kills and forgets every process of `session_id`.
  void close_session(const std::string& session_id);

  /// Kills every process, reaps the leaders and stops the reader thread.
  /// Idempotent; later starts fail.
  void shutdown();

  /// Number of running processes (all sessions).
  size_t running() const;

  size_t max_processes() const { return max_; }

  struct proc;

private:
  void reader_loop();
  void reap_locked();
  void kill_group(proc& p, const char* source);
  std::shared_ptr<proc> find_locked(const std::string& session_id,
                                    const std::string& id);

  const size_t max_;
  const size_t buffer_bytes_;
  mutable std::mutex mtx_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<proc>> procs_; // start order
  std::map<uint64_t, std::shared_ptr<proc>> by_key_; // epoll key -> proc
  uint64_t next_key_ = 1;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  bool stopping_ = false;
  std::thread reader_;
};

} // namespace mibyan
