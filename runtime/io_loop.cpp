// The middleman's event loop of a Mibyan actor system: CAF's epoll
// multiplexer, which polls for a short window instead of sleeping when a
// handler has said that an answer is due within microseconds
// (base/io_poll_hint.hpp; docs/architecture.md, "Actor system settings";
// the figures are in docs/benchmarks-history.md, "Fourth round").
//
// Why: a warm cell goes from the kernel broker to the Python kernel and its
// frame comes back some 20-50 us later. Sleeping in epoll_wait in between
// costs a wake-up, and on a virtual machine waking a thread costs several
// microseconds more than the work itself. So after a burst of work in
// which a handler called `expect_answer_soon()` (the kernel broker, when it
// writes a cell line), the loop keeps polling (epoll_wait with a zero
// timeout, then sched_yield so that a runnable thread on this CPU goes
// first) for `mibyan.io-spin-us` microseconds, the trade of Linux's
// `net.core.busy_poll`: up to that much CPU time per cell for a lower
// latency. A script's call handed to the blocking pool starts one too
// (actors/tool_invocation.cpp): the pool thread's answer then needs no
// wake-up of this thread. Other traffic never starts a window: a script's
// back-to-back calls answered on this thread are faster when the loop
// sleeps, because the two processes then share a CPU instead of waking
// each other across CPUs (measured in the same section). The loop never polls when the process may run on one
// CPU only (the kernel it waits for needs that CPU), when the setting is 0,
// or in a host's actor system (not configured by Mibyan: docs/embedding.md).
//
// Every TCP connection gets the BASP frame guard's scribe
// (runtime/basp_guard.hpp): a cap on announced frame sizes and node ids bound
// to connections, for BASP connections only.
//
// Thread: `run` is the middleman's thread. Contract otherwise that of
// caf::io::network::default_multiplexer::run: it returns once no handler is
// registered (the middleman stopping).
#include "runtime/runtime_impl.hpp"

#include <chrono>

#include <sched.h>

#include "caf/io/middleman.hpp"
#include "caf/io/network/default_multiplexer.hpp"

#include "base/io_poll_hint.hpp"
#include "runtime/basp_guard.hpp"

namespace mibyan {

namespace {

constexpr const char* spin_key = "mibyan.io-spin-us";

/// CPUs this process may run on (1 when it cannot tell).
int usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) != 0)
    return 1;
  return CPU_COUNT(&set);
}

class io_loop final : public caf::io::network::default_multiplexer {
public:
  explicit io_loop(caf::actor_system* sys)
      : default_multiplexer(sys),
        spin_(std::chrono::microseconds{
          caf::get_or(sys->config(), spin_key, int64_t{0})}),
        max_frame_(static_cast<uint32_t>(
          caf::get_or(sys->config(), basp_max_frame_key,
                      int64_t{default_basp_max_frame}))),
        claims_(make_basp_claims()) {}

  caf::io::scribe_ptr
  new_scribe(caf::io::network::native_socket fd) override {
    return make_guarded_scribe(*this, fd, claims_, max_frame_);
  }

  void run() override {
    if (spin_.count() <= 0 || usable_cpus() < 2) {
      default_multiplexer::run();
      return;
    }
    using clock = std::chrono::steady_clock;
    clock::time_point window_start;
    bool polling = false;
    take_answer_soon_hint(); // a mark left by whatever ran here before
    while (num_socket_handlers() > 0) {
      if (!polling) {
        poll_once(true);
      } else if (!poll_once(false)) {
        if (clock::now() - window_start < spin_)
          ::sched_yield();
        else
          polling = false; // nothing came: sleep from the next turn on
      }
      // A handler of this turn expects an answer: (re)open the window.
      if (take_answer_soon_hint()) {
        polling = true;
        window_start = clock::now();
      }
    }
  }

private:
  std::chrono::microseconds spin_;
  uint32_t max_frame_;
  std::shared_ptr<basp_claims> claims_;
};

} // namespace

void load_middleman(caf::actor_system_config& cfg, int64_t spin_us) {
  if (spin_us > 0)
    caf::put(cfg.content, spin_key, spin_us);
  cfg.load<caf::io::middleman, io_loop>();
}

} // namespace mibyan
