#include "base/host_hardening.hpp"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <mutex>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/prctl.h>
#include <unistd.h>

namespace mibyan {

namespace {

std::mutex hooks_mtx;
int term_pipe[2] = {-1, -1};
// The process that installed the handler. A child forked by a tool, a
// kernel spawn or the process registry keeps the handler until it resets
// its signals or execs; a SIGTERM in that window (a group kill right after
// the start) must end the child, never wake the parent's watcher through
// the inherited pipe.
pid_t handler_owner = 0;
// The termination signal received (0: none yet); set in the handler.
volatile sig_atomic_t term_received = 0;

std::vector<std::function<void()>>& hooks() {
  static std::vector<std::function<void()>> h;
  return h;
}

void on_term_signal(int sig) {
  // Async-signal-safe throughout (getpid, _exit, write).
  if (::getpid() != handler_owner)
    ::_exit(128 + sig); // a forked child before exec: die as by default
  term_received = sig;
  // Hand the signal number to the watcher thread.
  unsigned char b = static_cast<unsigned char>(sig);
  int saved = errno;
  (void)!::write(term_pipe[1], &b, 1);
  errno = saved;
}

void term_watcher() {
  unsigned char b = 0;
  for (;;) {
    auto n = ::read(term_pipe[0], &b, 1);
    if (n == 1)
      break;
    if (n < 0 && errno == EINTR)
      continue;
    return;
  }
  std::vector<std::function<void()>> run;
  {
    std::lock_guard<std::mutex> guard{hooks_mtx};
    run = hooks();
  }
  for (auto& h : run) {
    try {
      h();
    } catch (...) {
    }
  }
  int sig = b;
  ::signal(sig, SIG_DFL);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  ::pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  ::raise(sig);
  ::_exit(128 + sig);
}

bool at_default(int sig) {
  struct sigaction cur{};
  return ::sigaction(sig, nullptr, &cur) == 0 && cur.sa_handler == SIG_DFL
         && (cur.sa_flags & SA_SIGINFO) == 0;
}

} // namespace

void harden_host_process() {
  static std::once_flag once;
  std::call_once(once, [] {
    ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    for (int sig : {SIGPIPE, SIGHUP, SIGUSR1})
      if (at_default(sig))
        ::signal(sig, SIG_IGN);
    if (::pipe2(term_pipe, O_CLOEXEC) != 0)
      return;
    handler_owner = ::getpid();
    bool any = false;
    for (int sig : {SIGTERM, SIGQUIT}) {
      if (!at_default(sig))
        continue;
      struct sigaction sa{};
      sa.sa_handler = on_term_signal;
      sigemptyset(&sa.sa_mask);
      sa.sa_flags = SA_RESTART;
      ::sigaction(sig, &sa, nullptr);
      any = true;
    }
    if (any)
      std::thread{term_watcher}.detach();
  });
}

void become_subreaper() {
  ::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
}

void finish_termination() {
  int sig = term_received;
  if (sig == 0)
    return;
  // The watcher raises the signal once the hooks have run, which ends the
  // whole process while this thread waits.
  for (int i = 0; i < 3000; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds{10});
  ::_exit(128 + sig);
}

void add_termination_hook(std::function<void()> hook) {
  std::lock_guard<std::mutex> guard{hooks_mtx};
  hooks().push_back(std::move(hook));
}

} // namespace mibyan
