// File: runtime/lean_clock.hpp
//
// The actor clock of a Mibyan actor system: the timers behind `delayed_send`,
// request timeouts (actors/exit_timer.hpp) and `after` handlers, in place of
// CAF 0.17's thread_safe_actor_clock (loaded by runtime/lean_scheduler.hpp).
//
// Why: CAF's clock hands every operation to its timer thread through a
// queue and wakes that thread for each one: arming a timer, and the
// cancellation that every actor's exit sends (local_actor::cleanup cancels
// an actor's timeouts whether it armed any or not). A script's tool call
// arms its deadline and ends its invocation actor, so each call woke the
// clock thread about twice (docs/benchmarks.md, "The actor clock"). Here
// every operation changes the schedule in place under a mutex, and the
// timer thread is woken only when a new entry is due before the time it
// sleeps until; a cancellation never wakes it (it wakes later for nothing
// at most once, at the time it slept for).
//
// Semantics are CAF's: the same entries (simple_actor_clock's event types),
// an ordinary timeout replaces the actor's previous one of the same type,
// entries fire in due order as the messages CAF's clock sends
// (simple_actor_clock::ship), and an actor's exit drops its timeouts (not
// its delayed messages).
//
// Thread safety: every actor_clock member may be called from any thread
// (actors, the I/O loop, the blocking pool). Entries fire on the clock's own
// thread ("mibyan.clock"), outside the mutex; entries dropped by a
// cancellation are destroyed outside the mutex too, so an actor whose last
// reference they held may end and call back into the clock.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "caf/detail/thread_safe_actor_clock.hpp"
#include "caf/fwd.hpp"

namespace mibyan {

// Derives from CAF's thread-safe clock only because the scheduler's
// `clock()` returns that type (a covariant override); none of the base's
// queue is used.
class lean_actor_clock final : public caf::detail::thread_safe_actor_clock {
public:
  lean_actor_clock() = default;
  ~lean_actor_clock() override;

  lean_actor_clock(const lean_actor_clock&) = delete;
  lean_actor_clock& operator=(const lean_actor_clock&) = delete;

  void set_ordinary_timeout(time_point t, caf::abstract_actor* self,
                            caf::atom_value type, uint64_t id) override;
  void set_multi_timeout(time_point t, caf::abstract_actor* self,
                         caf::atom_value type, uint64_t id) override;
  void set_request_timeout(time_point t, caf::abstract_actor* self,
                           caf::message_id id) override;
  void cancel_ordinary_timeout(caf::abstract_actor* self,
                               caf::atom_value type) override;
  void cancel_request_timeout(caf::abstract_actor* self,
                              caf::message_id id) override;
  void cancel_timeouts(caf::abstract_actor* self) override;
  void schedule_message(time_point t, caf::strong_actor_ptr receiver,
                        caf::mailbox_element_ptr content) override;
  void schedule_message(time_point t, caf::group target,
                        caf::strong_actor_ptr sender,
                        caf::message content) override;
  void cancel_all() override;

  /// Starts the timer thread; `sys` (may be null in unit tests) gets CAF's
  /// thread hooks for it. Call once.
  void start(caf::actor_system* sys);

  /// Ends the timer thread and drops the entries left (they never fire).
  /// Entries set afterwards stay until the clock is destroyed. Idempotent.
  void stop();

  /// How often another thread woke the timer thread (a new entry due before
  /// the time it slept until): the clock's cost on the callers' path.
  uint64_t notifications() const;

  /// Entries waiting (timeouts and delayed messages).
  size_t pending() const;

private:
  using entry_list = std::vector<unique_delayed_event_ptr>;

  void run(caf::actor_system* sys);

  // Adds an entry made by simple_actor_clock's own helpers (`add`) and tells
  // the timer thread if it is now the earliest. Called without the mutex.
  template <class Add>
  void insert(time_point t, Add add);

  // Removes the actor's entries matching `pred` (all of them for a
  // predicate that is always true) into `out`. Requires the mutex.
  template <class Pred>
  void take(caf::actor_id aid, Pred pred, bool first_only, entry_list& out);

  mutable std::mutex mtx_;
  std::condition_variable cv_;
  // The time the timer thread sleeps until; time_point::max() while it
  // sleeps without an entry, time_point::min() while it runs (then no
  // caller needs to wake it: it looks at the schedule before sleeping).
  time_point sleeps_until_ = time_point::min();
  bool stopping_ = false;
  bool started_ = false;
  uint64_t notifications_ = 0;
  std::thread thread_;
};

} // namespace mibyan
