// File: node/tool_call_facade.hpp
//
// The one actor behind runtime::call_tool_async (and so call_tool and
// `mibyan tool --stdin`): it sends each call to the tool dispatcher (or
// `execute_code` straight to the kernel registry, which applies the script
// guard itself) and runs the caller's callback with the answer. One
// long-lived actor instead of one spawned per call: a spawned actor costs a
// scheduling hop to start and, when it ends, a wake-up of CAF's clock
// thread (CAF 0.17 cancels an ending actor's timeouts under the clock's
// lock and notifies it), both on the hot path of a warm cell.
//
// Thread safety: `call` and `stop` from any thread. Callbacks run on the
// actor's thread, one at a time; they must be short and must not block
// (docs/embedding.md). After `stop` (or when the actor is gone) every
// pending and every later call is answered with an error result at once.
#pragma once

#include <functional>
#include <memory>

#include "caf/fwd.hpp"

#include "actors/kernel_registry.hpp"
#include "actors/tool_dispatcher.hpp"
#include "node/runtime.hpp"

namespace mibyan {

class tool_call_facade {
public:
  tool_call_facade(caf::actor_system& sys, tool_dispatcher_actor dispatcher,
                   kernel_registry_actor kernels);
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
