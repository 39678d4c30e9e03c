// File: tests/support/wait_until.hpp
//
// Waiting on a condition instead of sleeping a fixed time: `wait_until`
// polls `pred` (every `poll`, 5 ms by default) until it holds or `limit`
// of real time passed, and returns whether it held. The limit is a
// failure bound, never the expected duration: a test asserts the result.
#pragma once

#include <chrono>
#include <thread>

namespace mibyan::test {

template <class Pred>
bool wait_until(Pred&& pred,
                std::chrono::milliseconds limit = std::chrono::seconds(30),
                std::chrono::milliseconds poll = std::chrono::milliseconds(5)) {
  auto until = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= until)
      return static_cast<bool>(pred());
    std::this_thread::sleep_for(poll);
  }
  return true;
}

} // namespace mibyan::test
