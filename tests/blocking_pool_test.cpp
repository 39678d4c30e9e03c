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
  for (int i = 0; i < 5; ++i) {
    std::promise<void> done;
    auto f = done.get_future();
    BOOST_TEST(pool.submit([&] { done.set_value(); }));
    f.wait();
    // One job at a time never needs a second thread (the first is idle
    // again, or about to be, when the next job comes).
    BOOST_TEST(pool.size() <= 2u);
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
