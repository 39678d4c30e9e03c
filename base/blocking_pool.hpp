// File: base/blocking_pool.hpp
//
// A fixed set of threads for blocking work (file I/O, subprocesses, waiting
// on HTTP), so that CAF scheduler threads never block. Jobs run in FIFO
// order; when all threads are busy, jobs queue.
//
// Thread safety: `submit` may be called from any thread. The destructor
// waits for running jobs and drops queued ones (their completion callbacks
// are not called), so owners must set cancel flags before destroying it.
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
  /// Starts `threads` worker threads (at least 1).
  explicit blocking_pool(size_t threads);
  ~blocking_pool();

  blocking_pool(const blocking_pool&) = delete;
  blocking_pool& operator=(const blocking_pool&) = delete;

  /// Queues `job`. Returns false (and drops the job) after shutdown began.
  /// A job must not throw; an exception that escapes is swallowed.
  bool submit(std::function<void()> job);

  /// Jobs queued but not yet started.
  size_t queued() const;

  /// Number of worker threads.
  size_t size() const { return threads_.size(); }

private:
  void work();

  mutable std::mutex mtx_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

} // namespace mibyan
