#include "base/blocking_pool.hpp"

#include <pthread.h>

namespace mibyan {

blocking_pool::blocking_pool(size_t threads)
  : max_threads_(threads == 0 ? 1 : threads) {
  threads_.reserve(max_threads_);
}

blocking_pool::~blocking_pool() {
  shutdown();
}

// Never on one of the pool's own threads (a thread cannot join itself): an
// owner whose last reference a job may hold shuts the pool down from its own
// thread first (runtime_impl's destructor does).
void blocking_pool::shutdown() {
  std::deque<std::function<void()>> dropped;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    stopping_ = true;
    dropped.swap(jobs_);
  }
  cv_.notify_all();
  dropped.clear(); // outside the lock: a job's captures may call submit
  // No thread is added once stopping_ is set (submit refuses), so threads_
  // no longer changes.
  std::lock_guard<std::mutex> guard{join_mtx_};
  for (auto& t : threads_)
    if (t.joinable())
      t.join();
}

bool blocking_pool::submit(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (stopping_)
      return false;
    jobs_.push_back(std::move(job));
    // Start a thread when the queued jobs outnumber the idle threads.
    if (jobs_.size() > idle_ && threads_.size() < max_threads_) {
      try {
        threads_.emplace_back([this] { work(); });
        ::pthread_setname_np(threads_.back().native_handle(), "mibyan.block");
      } catch (...) {
        if (threads_.empty()) { // no thread will ever run it
          jobs_.pop_back();
          return false;
        }
      }
    }
  }
  cv_.notify_one();
  return true;
}

size_t blocking_pool::queued() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return jobs_.size();
}

size_t blocking_pool::size() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return threads_.size();
}

void blocking_pool::work() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> guard{mtx_};
      ++idle_;
      cv_.wait(guard, [this] { return stopping_ || !jobs_.empty(); });
      --idle_;
      if (stopping_)
        return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    try {
      job();
    } catch (...) {
      // Jobs report through their own callbacks; nothing to do here.
    }
  }
}

} // namespace mibyan
