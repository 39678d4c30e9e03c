// File: runtime/tool_call_facade.hpp
//
// The one actor behind runtime::call_tool_async (and so call_tool and
// `mibyan tool --stdin`). It hands a warm `execute_code` cell straight to
// its kernel (actors/warm_kernels.hpp), sends any other `execute_code`
// call to the kernel registry (which applies the script guard itself) and
// every other call to the tool dispatcher, and runs the caller's callback
// with the answer.
//
// Why this shape (docs/benchmarks-history.md, "Bridge, warm cell and CLI
// start-up"): it is one long-lived actor, not one spawned per call (a
// spawned actor costs a scheduling hop to start and, when it ends, a
// wake-up of CAF's clock thread: CAF 0.17 cancels an ending actor's
// timeouts under the clock's lock and notifies it); and it is a broker on
// the middleman's thread, where the kernel brokers live, so a warm cell
// goes caller -> facade -> kernel -> Python -> kernel -> facade -> callback
// with no scheduler thread in between.
//
// Thread safety: `call` and `stop` from any thread. Callbacks run on the
// middleman's I/O thread, one at a time: they must be short and must never
// block or wait for another call (docs/embedding.md). After `stop` (or when
// the actor is gone) every pending and every later call is answered with
// an error result at once.
#pragma once

#include <functional>
#include <memory>

#include "caf/fwd.hpp"

#include "actors/kernel_registry.hpp"
#include "actors/tool_dispatcher.hpp"
#include "runtime/runtime.hpp"

namespace mibyan {

class tool_call_facade {
public:
  /// `warm` (may be null) enables the warm-cell fast path.
  tool_call_facade(caf::actor_system& sys, tool_dispatcher_actor dispatcher,
                   kernel_registry_actor kernels,
                   std::shared_ptr<warm_kernel_index> warm);
  ~tool_call_facade();
  tool_call_facade(const tool_call_facade&) = delete;
  tool_call_facade& operator=(const tool_call_facade&) = delete;

  /// Runs one call; `done` is invoked exactly once.
  void call(tool_request req, std::function<void(tool_outcome)> done);

  /// Ends the actor and answers every pending call with an error.
  void stop();

  struct pending_calls; // shared with the actor

private:
  std::shared_ptr<pending_calls> pending_;
};

} // namespace mibyan
