// The actor clock of a Mibyan actor system (runtime/lean_clock.hpp): CAF's
// timer semantics (delayed messages, request timeouts, receive timeouts, in
// due order; an actor's exit drops its timeouts), with arming and
// cancelling that wake the timer thread only for a new earliest entry. The
// last case counts the clock threads' wake-ups while a script calls a real
// built-in tool (read_file) through the blocking pool: with CAF's clock,
// every call woke its timer thread (its deadline armed, its invocation
// actor's exit).
#define BOOST_TEST_MODULE lean_clock
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <dirent.h>
#include <sys/resource.h>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "caf/all.hpp"

#include "messages/type_ids.hpp"
#include "runtime/lean_clock.hpp"
#include "runtime/lean_scheduler.hpp"
#include "runtime/runtime.hpp"
#include "tests/support/kernel_options.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wait_until.hpp"

using namespace mibyan;
using mibyan::test::wait_until;
using namespace std::chrono_literals;

namespace {

struct lean_system {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  lean_actor_clock* clock = nullptr;

  lean_system() {
    cfg.add_message_types<caf::id_block::mibyan>();
    cfg.set("scheduler.max-threads", size_t{2});
    load_lean_scheduler(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
    clock = lean_clock_of(*sys);
    BOOST_REQUIRE(clock != nullptr);
  }
};

// Records the order in which its messages arrive.
struct recorder {
  std::mutex mtx;
  std::vector<std::string> seen;
  void add(std::string x) {
    std::lock_guard<std::mutex> g{mtx};
    seen.push_back(std::move(x));
  }
  std::vector<std::string> get() {
    std::lock_guard<std::mutex> g{mtx};
    return seen;
  }
};

} // namespace

BOOST_AUTO_TEST_CASE(the_runtime_system_uses_the_lean_clock) {
  lean_system ls;
  BOOST_TEST(ls.sys->clock().now().time_since_epoch().count() != 0);
  // A system without it keeps CAF's clock.
  caf::actor_system_config plain_cfg;
  caf::actor_system plain{plain_cfg};
  BOOST_TEST(lean_clock_of(plain) == nullptr);
}

BOOST_AUTO_TEST_CASE(delayed_messages_fire_in_due_order_an_earlier_one_first) {
  lean_system ls;
  recorder rec;
  auto a = ls.sys->spawn([&rec](caf::event_based_actor*) -> caf::behavior {
    return {[&rec](const std::string& x) { rec.add(x); }};
  });
  // The clock sleeps toward an hour away; an entry due sooner must wake it.
  caf::delayed_anon_send(a, 3600s, std::string{"late"});
  caf::delayed_anon_send(a, 40ms, std::string{"second"});
  caf::delayed_anon_send(a, 5ms, std::string{"first"});
  BOOST_REQUIRE(wait_until([&] { return rec.get().size() >= 2; }));
  BOOST_TEST((rec.get() == std::vector<std::string>{"first", "second"}));
  BOOST_TEST(ls.clock->pending() == 1u); // "late" waits
  caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(request_timeout_fires_and_exit_drops_timeouts) {
  lean_system ls;
  std::atomic<int> timeouts{0};
  // Asks a peer that never answers: the request times out.
  auto silent = ls.sys->spawn([](caf::event_based_actor* self) {
    return caf::behavior{[self](int) -> caf::result<int> {
      return self->make_response_promise<int>(); // never delivered
    }};
  });
  ls.sys->spawn([&timeouts, silent](caf::event_based_actor* self) {
    self->request(silent, 20ms, 1)
      .then([](int) {},
            [self, &timeouts](caf::error& err) {
              if (err == caf::sec::request_timeout)
                ++timeouts;
              self->quit();
            });
  });
  BOOST_REQUIRE(wait_until([&] { return timeouts.load() == 1; }));
  // An actor that arms an hour-long request timeout and ends: its exit
  // drops the entry (no timer left behind, no reference kept).
  auto before = ls.clock->pending();
  ls.sys->spawn([silent](caf::event_based_actor* self) {
    self->request(silent, 3600s, 2).then([](int) {});
    self->quit();
  });
  BOOST_REQUIRE(wait_until([&] { return ls.clock->pending() == before; }));
  caf::anon_send_exit(silent, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(receive_timeout_fires_and_is_replaced) {
  lean_system ls;
  std::atomic<int> idle{0};
  std::atomic<int> got{0};
  auto a = ls.sys->spawn([&](caf::event_based_actor* self) -> caf::behavior {
    return {
      [&got](int) { ++got; },
      caf::after(30ms) >> [self, &idle] {
        ++idle;
        self->quit();
      },
    };
  });
  // Each message re-arms the one receive timeout (it replaces the last).
  for (int i = 0; i < 5; ++i)
    caf::anon_send(a, i);
  BOOST_REQUIRE(wait_until([&] { return idle.load() == 1; }));
  BOOST_TEST(got.load() == 5);
  BOOST_REQUIRE(wait_until([&] { return ls.clock->pending() == 0u; }));
}

BOOST_AUTO_TEST_CASE(later_deadlines_and_exits_never_wake_the_timer_thread) {
  lean_system ls;
  auto silent = ls.sys->spawn([](caf::event_based_actor* self) {
    return caf::behavior{[self](int) -> caf::result<int> {
      return self->make_response_promise<int>();
    }};
  });
  // One entry an hour away: the thread sleeps toward it.
  caf::delayed_anon_send(silent, 3600s, 0);
  auto base = ls.clock->notifications();
  // 300 actors, each with its own deadline (later than that hour) that it
  // drops when it ends: the shape of a script's tool calls.
  std::atomic<int> ended{0};
  for (int i = 0; i < 300; ++i)
    ls.sys->spawn([silent, &ended](caf::event_based_actor* self) {
      self->request(silent, 7200s, 1).then([](int) {});
      self->attach_functor([&ended] { ++ended; });
      self->quit();
    });
  BOOST_REQUIRE(wait_until([&] { return ended.load() == 300; }));
  BOOST_REQUIRE(wait_until([&] { return ls.clock->pending() == 1u; }));
  BOOST_TEST(ls.clock->notifications() == base);
  caf::anon_send_exit(silent, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(entries_left_at_shutdown_are_dropped) {
  // A system that ends with timers and delayed messages still pending
  // ends at once (they never fire) and frees them (LeakSanitizer).
  lean_system ls;
  auto a = ls.sys->spawn([](caf::event_based_actor*) -> caf::behavior {
    return {[](int) {}};
  });
  for (int i = 0; i < 10; ++i)
    caf::delayed_anon_send(a, 3600s, i);
  BOOST_TEST(ls.clock->pending() == 10u);
  caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  ls.sys.reset();
}

namespace {

// Voluntary context switches (sleeps that ended in a wake-up) of this
// process's threads named `name`.
long wakeups_of(const std::string& name) {
  long total = 0;
  DIR* d = ::opendir("/proc/self/task");
  if (d == nullptr)
    return -1;
  while (auto* e = ::readdir(d)) {
    std::string tid = e->d_name;
    if (tid == "." || tid == "..")
      continue;
    std::ifstream comm("/proc/self/task/" + tid + "/comm");
    std::string n;
    std::getline(comm, n);
    if (n != name)
      continue;
    std::ifstream st("/proc/self/task/" + tid + "/status");
    std::string line;
    while (std::getline(st, line))
      if (line.rfind("voluntary_ctxt_switches:", 0) == 0)
        total += std::atol(line.c_str() + 24);
  }
  ::closedir(d);
  return total;
}

// CPU time in microseconds (/proc/<tid>/schedstat) of this process's
// threads named `name`.
long cpu_us_of(const std::string& name) {
  long total = 0;
  DIR* d = ::opendir("/proc/self/task");
  if (d == nullptr)
    return -1;
  while (auto* e = ::readdir(d)) {
    std::string tid = e->d_name;
    if (tid == "." || tid == "..")
      continue;
    std::ifstream comm("/proc/self/task/" + tid + "/comm");
    std::string n;
    std::getline(comm, n);
    if (n != name)
      continue;
    std::ifstream st("/proc/self/task/" + tid + "/schedstat");
    long long ns = 0;
    if (st >> ns)
      total += static_cast<long>(ns / 1000);
  }
  ::closedir(d);
  return total;
}

} // namespace

BOOST_AUTO_TEST_CASE(script_tool_calls_do_not_wake_the_clock_thread) {
  test::temp_dir home;
  test::temp_dir work;
  auto opts = test::kernel_test_options(home.path());
  opts.code_execution.max_tool_calls = 1000;
  auto made = create_runtime(opts);
  BOOST_REQUIRE_MESSAGE(made, made.error);
  auto& rt = **made;
  auto file = work.path() + "/small.txt";
  std::ofstream(file) << "one line\n";
  // A first cell starts the kernel and warms the path.
  auto code = [&](int n) {
    return "from mibyan_tools import read_file\n"
           "for _ in range(" + std::to_string(n) + "):\n"
           "    r = read_file('" + file + "')\n"
           "    assert 'one line' in r['content'], r\n"
           "print('ok')\n";
  };
  auto warm = test::run_cell(rt, work.path(), code(5));
  BOOST_REQUIRE_MESSAGE(warm.get_string("output") == "ok\n", warm.dump());
  auto clocks = [] {
    return wakeups_of("caf.clock") + wakeups_of("mibyan.clock");
  };
  auto before = clocks();
  auto cpu_us = [] {
    rusage ru{};
    ::getrusage(RUSAGE_SELF, &ru);
    return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000L
           + ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
  };
  auto cpu_before = cpu_us();
  auto io_before = wakeups_of("caf.multiplexer");
  auto io_cpu_before = cpu_us_of("caf.multiplexer");
  auto pool_cpu_before = cpu_us_of("mibyan.block");
  auto pool_before = wakeups_of("mibyan.block");
  // MIBYAN_LEAN_CLOCK_CALLS sets another count (for counting system calls
  // per call from outside: `perf stat` of two counts, their difference).
  int calls = 400;
  if (const char* n = std::getenv("MIBYAN_LEAN_CLOCK_CALLS");
      n != nullptr && std::atoi(n) >= 80)
    calls = std::atoi(n);
  auto t0 = std::chrono::steady_clock::now();
  auto r = test::run_cell(rt, work.path(), code(calls));
  auto cell_us = std::chrono::duration_cast<std::chrono::microseconds>(
                   std::chrono::steady_clock::now() - t0).count();
  BOOST_REQUIRE_MESSAGE(r.get_string("output") == "ok\n", r.dump());
  BOOST_TEST(r.get_int("tool_calls_made", -1) == calls);
  auto woke = clocks() - before;
  BOOST_TEST_MESSAGE("wake-ups during " << calls << " read_file calls: clock "
                     << woke << ", threads named caf.multiplexer (I/O loop, workers) "
                     << wakeups_of("caf.multiplexer") - io_before
                     << ", pool " << wakeups_of("mibyan.block") - pool_before
                     << "; CPU time per call: this process "
                     << (cpu_us() - cpu_before) / calls << " us, "
                     << "caf.multiplexer threads "
                     << (cpu_us_of("caf.multiplexer") - io_cpu_before) / calls
                     << " us, pool "
                     << (cpu_us_of("mibyan.block") - pool_cpu_before) / calls
                     << " us; cell wall time per call " << cell_us / calls
                     << " us");
  // The runtime's own periodic timers may fire meanwhile; a wake-up per
  // call (CAF's clock: two notifications per call) is far above this.
  BOOST_TEST(woke < calls / 8, "clock wake-ups: " << woke);
}
