// File: actors/exit_timer.hpp
//
// One-shot timers that end with their actor, for long deadlines (a tool
// call's, a cell's).
//
// Why not `delayed_send`: CAF 0.17's clock keeps a strong reference to the
// receiver of a delayed message until the message fires, whether or not
// the actor has ended, so every per-call actor that ended early kept its
// memory (a kernel broker its scribes and read buffers too) for the whole
// deadline: with a tool deadline of minutes, memory grew with the call
// rate (bench/soak: some 2 KB per turn; docs/benchmarks-history.md, "Hardening at scale"). A request's
// timeout is different: CAF cancels it when the actor exits.
//
// So a timer is a request of the actor to itself that it never answers
// (`exit_timer_handler` keeps no promise), and `fire` runs when that
// request times out. Contract: the actor's behavior includes
// `exit_timer_handler(self)`; `fire` runs in the actor's context, at most
// once, never after the actor ended. A delay already past (negative)
// fires at once. Cost: one message to itself and one clock entry per timer.
#pragma once

#include <utility>

#include "caf/actor.hpp"
#include "caf/actor_cast.hpp"
#include "caf/duration.hpp"
#include "caf/response_promise.hpp"
#include "caf/result.hpp"
#include "caf/sec.hpp"

#include "messages/type_ids.hpp"

namespace mibyan {

template <class Self, class Duration, class F>
void start_exit_timer(Self* self, Duration delay, F fire) {
  if (delay < Duration::zero())
    delay = Duration::zero();
  self->request(caf::actor_cast<caf::actor>(self), delay, timer_atom_v)
    .then([] {},
          [fire = std::move(fire)](caf::error& err) mutable {
            if (err == caf::sec::request_timeout)
              fire();
          });
}

/// The handler that leaves a timer's request unanswered (a delegated
/// result: CAF sends no reply). Typed actors list `reacts_to<timer_atom>`.
template <class Self>
auto exit_timer_handler(Self* self) {
  return [self](timer_atom) -> caf::result<void> {
    return self->make_response_promise();
  };
}

} // namespace mibyan
