// File: actors/outside_spawn.hpp
//
// Spawning an actor from a thread that is not one of CAF's own: a
// blocking-pool job, or an application's thread calling the runtime.
//
// CAF 0.17's spawn sets the calling thread's current logger, a counted
// reference to the actor system's logger, and the system's destructor waits
// until the last such reference is gone. CAF's threads end before that
// wait, and the destroying thread drops its own; any other thread keeps the
// reference until it exits. So a runtime destroyed while a pool thread or an
// application thread that spawned is still alive hung in that wait.
//
// Contract: construct an `outside_spawn_guard` before spawning outside an
// actor's handler; when it goes out of scope it puts back what the thread
// had: a thread that had no current logger has none again, and a CAF thread
// (or one of a host that logs) keeps its own. Thread: the guard must end on
// the thread that made it.
#pragma once

#include "caf/logger.hpp"

namespace mibyan {

class outside_spawn_guard {
public:
  outside_spawn_guard() : had_logger_(caf::logger::current_logger() != nullptr) {}
  ~outside_spawn_guard() {
    if (!had_logger_)
      caf::logger::set_current_actor_system(nullptr);
  }
  outside_spawn_guard(const outside_spawn_guard&) = delete;
  outside_spawn_guard& operator=(const outside_spawn_guard&) = delete;

private:
  bool had_logger_;
};

} // namespace mibyan
