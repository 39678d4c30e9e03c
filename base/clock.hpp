// File: base/clock.hpp
//
// The time source of logic that reads the time: deadlines, idle reaping,
// heartbeats and failure detection, retry back-off, lease expiry. The
// runtime hands one to its actors through its services
// (actors/services.hpp); tests hand in a `manual_clock` and move it together
// with CAF's simulated clock (tests/support/sim_fixture.hpp).
//
// What it is not for: CAF's own timers (`delayed_send`, request timeouts)
// run on the actor system's clock, which the test coordinator simulates;
// durations measured for reports and metrics only may keep the real clock,
// as may the deadlines a tool compares against inside its own blocking work
// (tools/tool.hpp, tool_context::deadline).
//
// The same shape as the session store's clock (storage/session_store.hpp,
// store_options::now_ms): `wall_fn()` gives it as a function.
//
// Thread safety: every member is safe to call from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

namespace mibyan {

class runtime_clock {
public:
  using steady_time = std::chrono::steady_clock::time_point;

  virtual ~runtime_clock() = default;

  /// Monotonic time, for deadlines and intervals.
  virtual steady_time steady_now() const = 0;

  /// Wall time in milliseconds since the Unix epoch, for stored and
  /// exchanged timestamps (lease expiry, session rows).
  virtual int64_t wall_ms() const = 0;

  /// `wall_ms` as a function (the shape of store_options::now_ms). The
  /// function keeps the clock alive.
  static std::function<int64_t()>
  wall_fn(std::shared_ptr<const runtime_clock> clock);
};

using clock_ptr = std::shared_ptr<const runtime_clock>;

/// The machine's clocks (std::chrono::steady_clock and system_clock). One
/// shared instance; never null.
clock_ptr real_clock();

/// A clock that moves only when told to (tests). Starts at a steady time of
/// one hour after the steady epoch and at `wall_start_ms`.
class manual_clock final : public runtime_clock {
public:
  explicit manual_clock(int64_t wall_start_ms = 1'700'000'000'000);

  steady_time steady_now() const override;
  int64_t wall_ms() const override;

  /// Moves both clocks forward by `d` (negative values are ignored).
  void advance(std::chrono::nanoseconds d);

  /// Sets the wall clock alone (it may jump back, like a real one).
  void set_wall_ms(int64_t ms);

private:
  std::atomic<int64_t> steady_ns_;
  std::atomic<int64_t> wall_ns_;
};

} // namespace mibyan
