// File: base/blocking_pool.hpp
//
// A bounded set of threads for blocking work (file I/O, subprocesses,
// waiting on HTTP), so that CAF scheduler threads never block. Threads start
// on demand (when the queued jobs outnumber the idle threads), up to the
// bound, and stay until the pool ends: a short-lived process that runs one
// tool starts one thread, not the whole pool. Jobs run in FIFO order; when
// all threads are busy, jobs queue.
//
// Thread safety: `submit` may be called from any thread. `shutdown` (and
// the destructor, which calls it) waits for running jobs and drops queued
// ones (their completion callbacks are not called), so owners must set
// cancel flags before stopping it.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace mibyan {

class blocking_pool {
public:
  /// A pool of at most `threads` worker threads (at least 1), started on
  /// demand.
  explicit blocking_pool(size_t threads);
  ~blocking_pool();

  blocking_pool(const blocking_pool&) = delete;
  blocking_pool& operator=(const blocking_pool&) = delete;

  /// Queues `job`. Returns false (and drops the job) after shutdown began.
  /// A job must not throw; an exception that escapes is swallowed.
  bool submit(std::function<void()> job);

  /// Stops the pool: from now on `submit` refuses jobs, the queued ones are
  /// dropped, and this waits for the running ones. The object stays usable
  /// (submit keeps returning false), so an owner can stop the pool while
  /// other threads may still hold it, and destroy it once they are gone.
  /// Idempotent; never call it from a job of this pool.
  void shutdown();

  /// Jobs queued but not yet started.
  size_t queued() const;

  /// Number of worker threads started so far.
  size_t size() const;

private:
  void work();

  mutable std::mutex mtx_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  size_t max_threads_;
  size_t idle_ = 0; // threads waiting for a job
  std::vector<std::thread> threads_;
  std::mutex join_mtx_; // one shutdown joins the threads at a time
};

} // namespace mibyan
