// File: tests/support/sim_fixture.hpp
//
// Actor tests in simulated time: CAF's test coordinator
// (caf/test/dsl.hpp, test_coordinator_fixture) runs every actor of the
// system on the test's thread, one message at a time, and its clock moves
// only when the test moves it; `clock` is the runtime clock
// (base/clock.hpp) the actors under test read, moved together with it.
//
// Use inside a Boost.Test case (BOOST_FIXTURE_TEST_CASE). The DSL's
// `expect`/`allow` macros report through CAF's own test engine, which does
// not run here: use `run()`, `advance()` and `ask()` with Boost checks.
//
// Threads: only the test's thread may run the scheduler. A message sent
// from another thread (a blocking-pool job, a curl callback) to an actor of
// this system races with it; a test whose actors receive such messages
// must wait (wait_until, tests/support/wait_until.hpp) for the sending thread to be done before it runs
// the scheduler again.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>

#include "caf/all.hpp"
#include "caf/test/dsl.hpp"

#include "base/clock.hpp"
#include "messages/type_ids.hpp"
#include "tests/support/wait_until.hpp"

namespace mibyan::test {

struct sim_config : caf::actor_system_config {
  sim_config() {
    add_message_types<caf::id_block::mibyan>();
  }
};

/// The reply to one request made with `ask`: the value, or the error.
template <class T>
struct reply_box {
  std::optional<T> value;
  std::optional<caf::error> error;
  bool done() const { return value.has_value() || error.has_value(); }
};

struct sim_fixture : test_coordinator_fixture<sim_config> {
  std::shared_ptr<manual_clock> clock = std::make_shared<manual_clock>();

  /// Runs every message that is ready (no time passes).
  void run_all() {
    sched.run();
  }

  /// Moves simulated time (CAF's clock and `clock`) forward by `d` in
  /// steps of at most `step`, firing the timers due after each step and
  /// running what they start, so a timer re-armed by a handler fires again
  /// within the same call.
  void advance(caf::timespan d,
               caf::timespan step = std::chrono::milliseconds(100)) {
    run_all();
    while (d.count() > 0) {
      auto now = std::min(d, step);
      clock->advance(now);
      sched.advance_time(now);
      run_all();
      d -= now;
    }
  }

  /// Sends `xs...` as a request to `dest` from a helper actor of this
  /// system and runs the system; the box holds the reply once it came.
  template <class T, class Handle, class... Ts>
  std::shared_ptr<reply_box<T>> ask(const Handle& dest, Ts... xs) {
    auto box = std::make_shared<reply_box<T>>();
    sys.spawn([=](caf::event_based_actor* a) {
      a->request(dest, caf::infinite, xs...)
        .then([box](T& x) { box->value = std::move(x); },
              [box](caf::error& err) { box->error = std::move(err); });
    });
    run_all();
    return box;
  }
};

} // namespace mibyan::test
