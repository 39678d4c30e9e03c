// File: cli/interrupt_watcher.hpp
//
// Turns SIGINT (Ctrl-C) into a callback instead of killing the process. A
// dedicated thread waits in sigwait(), so the callback may do anything (no
// async-signal-safety rules). Call `block_interrupt_signals()` on the main
// thread before any other thread starts (the actor system's included), so
// only the watcher receives SIGINT.
#pragma once

#include <atomic>
#include <functional>
#include <thread>

namespace mibyan::cli {

/// Blocks SIGINT and SIGUSR2 in the calling thread and every thread it
/// creates afterwards.
void block_interrupt_signals();

class interrupt_watcher {
public:
  /// Starts the watcher thread; `on_interrupt` runs on it for each SIGINT.
  explicit interrupt_watcher(std::function<void()> on_interrupt);

  /// Stops and joins the thread.
  ~interrupt_watcher();

  interrupt_watcher(const interrupt_watcher&) = delete;
  interrupt_watcher& operator=(const interrupt_watcher&) = delete;

private:
  std::function<void()> on_interrupt_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

} // namespace mibyan::cli
