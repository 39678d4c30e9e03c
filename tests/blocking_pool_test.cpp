// base/blocking_pool: threads start on demand, up to the bound, and the
// bound still allows that many jobs at once.
#define BOOST_TEST_MODULE blocking_pool
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "base/blocking_pool.hpp"

using namespace mibyan;
using namespace std::chrono_literals;

BOOST_AUTO_TEST_CASE(threads_start_on_demand) {
  blocking_pool pool(8);
  BOOST_TEST(pool.size() == 0u);
  auto run_one = [&] {
    std::promise<void> done;
    auto f = done.get_future();
    BOOST_TEST(pool.submit([&] { done.set_value(); }));
    f.wait();
  };
  // The first job starts exactly one thread, not the pool's bound.
  run_one();
  BOOST_TEST(pool.size() == 1u);
  // Later jobs one at a time start a thread only when the earlier ones
  // are not back to idle yet (the job's signal comes before that, and a
  // loaded machine may not run the thread in between): at most one per
  // job, whatever the timing.
  for (size_t i = 2; i <= 5; ++i) {
    run_one();
    BOOST_TEST(pool.size() <= i);
  }
}

BOOST_AUTO_TEST_CASE(bound_is_reached_and_respected_under_blocking_jobs) {
  blocking_pool pool(4);
  std::mutex m;
  std::condition_variable cv;
  bool release = false;
  std::atomic<int> running{0}, peak{0}, finished{0};
  for (int i = 0; i < 10; ++i)
    pool.submit([&] {
      int now = ++running;
      for (int p = peak.load(); now > p && !peak.compare_exchange_weak(p, now);)
        ;
      std::unique_lock<std::mutex> g{m};
      cv.wait(g, [&] { return release; });
      --running;
      ++finished;
    });
  for (int i = 0; i < 500 && peak.load() < 4; ++i)
    std::this_thread::sleep_for(10ms);
  BOOST_TEST(peak.load() == 4);
  BOOST_TEST(pool.size() == 4u);
  {
    std::lock_guard<std::mutex> g{m};
    release = true;
  }
  cv.notify_all();
  for (int i = 0; i < 500 && finished.load() < 10; ++i)
    std::this_thread::sleep_for(10ms);
  BOOST_TEST(finished.load() == 10);
  BOOST_TEST(pool.size() == 4u);
}

// shutdown() stops the pool but keeps the object: a thread that still holds
// it (an exiting actor in a host's system, after the runtime went) gets a
// refusal, not a destroyed pool (runtime/runtime.cpp, ~impl). It waits for the
// running job, drops the queued ones, and may be repeated.
BOOST_AUTO_TEST_CASE(shutdown_waits_running_drops_queued_then_refuses) {
  blocking_pool pool(1);
  std::promise<void> started;
  auto started_f = started.get_future();
  std::atomic<bool> running_done{false}, queued_ran{false};
  BOOST_TEST(pool.submit([&] {
    started.set_value();
    std::this_thread::sleep_for(50ms);
    running_done = true;
  }));
  started_f.wait();
  BOOST_TEST(pool.submit([&] { queued_ran = true; }));
  pool.shutdown();
  BOOST_TEST(running_done.load());
  BOOST_TEST(!queued_ran.load());
  BOOST_TEST(!pool.submit([&] { queued_ran = true; }));
  // From another thread too, while the owner shuts down again.
  auto other = std::async(std::launch::async, [&] {
    return pool.submit([&] { queued_ran = true; });
  });
  pool.shutdown();
  BOOST_TEST(!other.get());
  BOOST_TEST(!queued_ran.load());
}
