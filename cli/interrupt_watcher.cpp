#include "cli/interrupt_watcher.hpp"

#include <csignal>

#include <pthread.h>

namespace mibyan::cli {

namespace {

sigset_t watched_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGUSR2); // wakes the thread for shutdown
  return set;
}

} // namespace

void block_interrupt_signals() {
  auto set = watched_signals();
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

interrupt_watcher::interrupt_watcher(std::function<void()> on_interrupt)
  : on_interrupt_(std::move(on_interrupt)) {
  thread_ = std::thread([this] {
    auto set = watched_signals();
    for (;;) {
      int sig = 0;
      if (sigwait(&set, &sig) != 0 || stop_)
        return;
      if (sig == SIGINT && on_interrupt_)
        on_interrupt_();
    }
  });
}

interrupt_watcher::~interrupt_watcher() {
  stop_ = true;
  ::pthread_kill(thread_.native_handle(), SIGUSR2);
  thread_.join();
}

} // namespace mibyan::cli
