// Bounded waits on a condition, for tests: for what happens on another
// thread's, actor's or process's own time, without guessing a delay. A wait
// never asserts a time: the limit only bounds a test that would otherwise
// hang, so it is generous for a loaded machine.
#pragma once

#include <chrono>
#include <thread>

namespace mibyan::test {

/// Polls `pred` every `poll` until it holds (then true) or `limit` passed
/// (then one last try decides). Runs `pred` on the calling thread.
template <class Pred, class Rep, class Period>
bool eventually(Pred&& pred, std::chrono::duration<Rep, Period> limit,
                std::chrono::milliseconds poll = std::chrono::milliseconds{10}) {
  using clock = std::chrono::steady_clock;
  auto end = clock::now() + std::chrono::duration_cast<clock::duration>(limit);
  while (clock::now() < end) {
    if (pred())
      return true;
    std::this_thread::sleep_for(poll);
  }
  return static_cast<bool>(pred());
}

/// The same with the limit in seconds.
template <class Pred>
bool eventually(Pred&& pred, double seconds = 60) {
  return eventually(std::forward<Pred>(pred),
                    std::chrono::duration<double>(seconds));
}

} // namespace mibyan::test
