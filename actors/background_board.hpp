// File: actors/background_board.hpp
//
// The runtime-wide view of background work (docs/agent_loop.md,
// "Background deliveries"): which sessions have background delegate_task
// children running, and who hears about finished background work (the
// turn-event hub's live stream, `mibyan chat`'s announcer). One instance
// per runtime, in runtime_services.
//
// The conversations own the work itself (a child is linked to its parent's
// conversation actor); the board only counts and announces.
//
// CAF-free. Thread-safe: every member may be called from any thread.
// Listeners run on the announcing thread (a conversation's scheduler
// thread): they must return promptly and never block or wait.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "messages/background_notice.hpp"

namespace mibyan {

class background_board {
public:
  using listener = std::function<void(const background_notice&)>;

  /// Adds a listener; returns its token for unwatch.
  uint64_t watch(listener fn);
  /// Removes it (it is not called once this returns, unless a call is
  /// running on another thread right now).
  void unwatch(uint64_t token);
  /// Calls every listener with `n` (outside the board's lock).
  void announce(const background_notice& n) const;

  /// A background child of `session_id` started / ended.
  void child_started(const std::string& session_id);
  void child_ended(const std::string& session_id);
  /// Background children of `session_id` running now.
  size_t running(const std::string& session_id) const;
  /// Waits until `session_id` has no background child running, at most
  /// `timeout`; returns how many still run.
  size_t wait_idle(const std::string& session_id,
                   std::chrono::milliseconds timeout) const;

private:
  mutable std::mutex mtx_;
  mutable std::condition_variable cv_;
  std::map<uint64_t, listener> listeners_;
  uint64_t next_ = 1;
  std::map<std::string, size_t> running_;
};

} // namespace mibyan
