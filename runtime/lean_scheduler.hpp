// File: runtime/lean_scheduler.hpp
//
// The scheduler module of a Mibyan actor system: CAF's work-sharing
// coordinator (docs/architecture.md, "Actor system settings") with the lean
// actor clock (runtime/lean_clock.hpp) in place of CAF's timer thread.
// CAF's coordinator still starts its own clock thread, which stays idle (no
// timer is ever handed to it).
//
// Contract: `load_lean_scheduler` before the actor_system is constructed;
// the system then ignores `scheduler.policy` (the coordinator is always
// work-sharing) but honours the other `scheduler.*` settings. A system
// meant for CAF's test coordinator must not load it.
#pragma once

#include "caf/fwd.hpp"

namespace mibyan {

class lean_actor_clock;

/// Makes `cfg`'s actor system use the work-sharing coordinator with the
/// lean actor clock.
void load_lean_scheduler(caf::actor_system_config& cfg);

/// The lean clock of `sys`, or null when `sys` runs another scheduler.
lean_actor_clock* lean_clock_of(caf::actor_system& sys);

} // namespace mibyan
