#include "base/blocking_pool.hpp"

#include <pthread.h>

namespace mibyan {

blocking_pool::blocking_pool(size_t threads) {
  if (threads == 0)
    threads = 1;
  threads_.reserve(threads);
  for (size_t i = 0; i < threads; ++i) {
    threads_.emplace_back([this] { work(); });
    ::pthread_setname_np(threads_.back().native_handle(), "mibyan.block");
  }
}

blocking_pool::~blocking_pool() {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    stopping_ = true;
    jobs_.clear();
  }
  cv_.notify_all();
  for (auto& t : threads_)
    t.join();
}

bool blocking_pool::submit(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (stopping_)
      return false;
    jobs_.push_back(std::move(job));
  }
  cv_.notify_one();
  return true;
}

size_t blocking_pool::queued() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return jobs_.size();
}

void blocking_pool::work() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> guard{mtx_};
      cv_.wait(guard, [this] { return stopping_ || !jobs_.empty(); });
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
