// File: actors/guardian_call.hpp
//
// Smart-mode reviewer calls (docs/approvals.md): one non-streamed model
// call through a provider connection actor, waited for on a blocking-pool
// thread. The pool thread only sends messages: a relay actor, spawned at
// start-up, makes the request and hands the answer back through a
// promise (spawning actors or scoped actors from pool threads is avoided:
// it kept the actor system from shutting down).
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "actors/provider.hpp"
#include "approvals/approval_service.hpp"

namespace mibyan {

class guardian_relay {
public:
  /// Spawns the relay actor. Call from start-up code.
  explicit guardian_relay(caf::actor_system& sys);

  /// Asks `provider`; returns within `timeout` (plus a little) or soon
  /// after `*cancelled` turns true (the provider call is then cancelled).
  /// Blocking; any non-scheduler thread.
  guardian_reply ask(const provider_actor& provider,
                     const std::string& system_prompt,
                     const std::string& user_prompt,
                     std::chrono::milliseconds timeout,
                     const std::atomic<bool>* cancelled);

  /// Sends `req` (its request_id is replaced by a unique one; `stream` is
  /// turned off) as it is: MCP sampling uses this for its own messages,
  /// model and token cap (docs/mcp.md, "Sampling"). Same waiting rules as
  /// the other overload.
  guardian_reply ask(const provider_actor& provider, chat_request req,
                     std::chrono::milliseconds timeout,
                     const std::atomic<bool>* cancelled);

  /// Stops the relay actor; waiting calls return at once. Thread-safe.
  void stop();

  struct waiting;

private:
  std::shared_ptr<waiting> waiting_;
  caf::actor relay_;
};

} // namespace mibyan
