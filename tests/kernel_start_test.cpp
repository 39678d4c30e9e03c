#define BOOST_TEST_MODULE kernel_start
#include <boost/test/unit_test.hpp>

// Kernel starts run on the blocking pool, not in the kernel registry's
// handler (docs/architecture.md, "Actors"): while a kernel starts, the
// registry keeps answering, the cells of its session wait in order, and an
// interrupt, a reset, a closed session or the runtime's end are handled.
//
// The kernels here start with an interpreter wrapper that waits for a
// release file before it runs Python. The runtime runs the wrapper once to
// find the real interpreter (kernels/interpreter_cache.hpp), so each start
// is held at that point until the test releases it, deterministically.

#include <chrono>
#include <fstream>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include <sys/stat.h>

#include "base/json.hpp"
#include "node/runtime.hpp"
#include "tests/support/kernel_options.hpp"
#include "tests/support/proc_counts.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mibyan;
using namespace std::chrono;

namespace {

bool eventually(const std::function<bool()>& cond, double seconds = 30) {
  auto end = steady_clock::now()
             + duration_cast<steady_clock::duration>(
                 duration<double>(seconds));
  while (!cond()) {
    if (steady_clock::now() > end)
      return false;
    std::this_thread::sleep_for(milliseconds{20});
  }
  return true;
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

long children() {
  auto c = test::children();
  return c.live + c.zombies;
}

using pending = std::future<tool_outcome>;

struct held_start {
  test::temp_dir home;
  test::temp_dir work;
  std::string release_file;
  std::unique_ptr<runtime> rt;

  held_start() {
    release_file = work / "release";
    auto wrapper = work / "held-python";
    {
      std::ofstream w{wrapper};
      // At most about 4 s: the runtime gives a wrapper 5 s.
      w << "#!/bin/sh\n"
        << "i=0\n"
        << "while [ ! -e '" << release_file << "' ] && [ $i -lt 200 ]; do\n"
        << "  sleep 0.02; i=$((i+1))\n"
        << "done\n"
        << "exec python3 \"$@\"\n";
    }
    ::chmod(wrapper.c_str(), 0755);
    auto opts = test::kernel_test_options(home.path(), 0);
    opts.code_execution.mode = "strict";
    opts.code_execution.python = wrapper;
    std::string err;
    rt = runtime::create(opts, &err);
    BOOST_REQUIRE_MESSAGE(rt != nullptr, err);
  }

  ~held_start() { release(); }

  void release() { std::ofstream{release_file}.put('1'); }

  pending exec(const std::string& session, const std::string& code,
               bool reset = false) {
    json::value args;
    args["code"] = code;
    if (reset)
      args["reset"] = true;
    auto p = std::make_shared<std::promise<tool_outcome>>();
    auto f = p->get_future();
    rt->call_tool_async({session, "c", "execute_code", args.dump(),
                         work.path()},
                        [p](tool_outcome o) { p->set_value(std::move(o)); });
    return f;
  }

  int64_t stat(const std::string& name) {
    auto s = json::parse(rt->kernel_stats());
    if (!s || !s.v->is_object())
      return -1;
    return s.v->get_int(name, -1);
  }

  // The registry answered that `n` kernels are starting.
  bool starting(int64_t n) {
    return eventually([&] { return stat("starting") == n; });
  }
};

json::value result(pending& f, int seconds = 60) {
  BOOST_REQUIRE_MESSAGE(f.wait_for(std::chrono::seconds{seconds})
                          == std::future_status::ready,
                        "no answer within " << seconds << " s");
  auto out = f.get();
  auto parsed = json::parse(out.result_json);
  BOOST_REQUIRE_MESSAGE(parsed && parsed.v->is_object(), out.result_json);
  return *parsed.v;
}

bool answered(pending& f) {
  return f.wait_for(seconds{0}) == std::future_status::ready;
}

} // namespace

BOOST_AUTO_TEST_CASE(the_registry_answers_while_a_kernel_starts) {
  held_start h;
  auto cell = h.exec("a", "print(6 * 7)");
  // A registry blocked in the start would not answer the stats request
  // (kernel_stats gives "{}" after 5 s).
  BOOST_REQUIRE(h.starting(1));
  BOOST_TEST(h.stat("kernels") == 0);
  BOOST_TEST(!answered(cell));
  // Another session's kernel starts beside it.
  auto other = h.exec("b", "print('b')");
  BOOST_REQUIRE(h.starting(2));
  h.release();
  auto r = result(cell);
  BOOST_TEST(r.get_string("status") == "success", r.dump());
  BOOST_TEST(r.get_string("output") == "42\n");
  BOOST_TEST(r.find("note") == nullptr, r.dump()); // no fallback
  auto rb = result(other);
  BOOST_TEST(rb.get_string("output") == "b\n", rb.dump());
  BOOST_TEST(h.stat("starting") == 0);
  BOOST_TEST(h.stat("kernels") == 2);
}

BOOST_AUTO_TEST_CASE(waiting_cells_run_in_order_on_one_kernel) {
  held_start h;
  auto first = h.exec("a", "x = 1");
  BOOST_REQUIRE(h.starting(1));
  auto second = h.exec("a", "x += 1\nprint(x)");
  auto third = h.exec("a", "x += 1\nprint(x)");
  // Both wait for the same start.
  BOOST_REQUIRE(eventually([&] { return h.stat("starting") == 1; }));
  h.release();
  BOOST_TEST(result(first).get_string("status") == "success");
  auto r2 = result(second);
  auto r3 = result(third);
  BOOST_TEST(r2.get_string("output") == "2\n", r2.dump());
  BOOST_TEST(r3.get_string("output") == "3\n", r3.dump());
  BOOST_TEST(h.stat("kernels") == 1);
  BOOST_TEST(h.stat("spawned") == 1);
}

BOOST_AUTO_TEST_CASE(an_interrupt_answers_waiting_cells_at_once) {
  held_start h;
  auto cell = h.exec("a", "print('never')");
  BOOST_REQUIRE(h.starting(1));
  h.rt->interrupt("a", "user pressed stop");
  // Answered while the start is still held.
  auto r = result(cell, 30);
  BOOST_TEST(r.get_string("status") == "interrupted", r.dump());
  BOOST_TEST(contains(r.get_string("output"), "user pressed stop"), r.dump());
  BOOST_TEST(h.stat("starting") == 1);
  // The kernel still starts and serves the session.
  h.release();
  auto next = h.exec("a", "print('after')");
  auto r2 = result(next);
  BOOST_TEST(r2.get_string("output") == "after\n", r2.dump());
  BOOST_TEST(h.stat("spawned") == 1);
}

BOOST_AUTO_TEST_CASE(a_reset_answers_the_cells_queued_before_it) {
  held_start h;
  auto first = h.exec("a", "y = 1");
  BOOST_REQUIRE(h.starting(1));
  auto reset = h.exec("a", "print('y' in globals())", true);
  // The cell before the reset is answered at once, not run.
  auto r1 = result(first, 30);
  BOOST_TEST(r1.get_string("status") == "error", r1.dump());
  BOOST_TEST(contains(r1.get_string("error"), "reset"), r1.dump());
  h.release();
  auto r2 = result(reset);
  BOOST_TEST(r2.get_string("output") == "False\n", r2.dump());
  BOOST_TEST(h.stat("spawned") == 1);
}

BOOST_AUTO_TEST_CASE(closing_the_session_cancels_its_start) {
  held_start h;
  auto cell = h.exec("a", "print('never')");
  BOOST_REQUIRE(h.starting(1));
  h.rt->close_session("a");
  auto r = result(cell, 30);
  BOOST_TEST(r.get_string("status") == "error", r.dump());
  BOOST_TEST(contains(r.get_string("error"), "session ended"), r.dump());
  h.release();
  // The kernel that arrives is stopped, and its process goes.
  BOOST_TEST(h.starting(0));
  BOOST_TEST(h.stat("kernels") == 0);
  BOOST_TEST(eventually([] { return children() == 0; }),
             "children left: " << children());
}

BOOST_AUTO_TEST_CASE(a_runtime_destroyed_during_a_start_leaves_nothing) {
  // Count after a first runtime: it installs process-wide state (the
  // SIGTERM watcher's pipe) that lives as long as the process.
  { held_start warm; }
  auto fds = test::open_fds();
  {
    held_start h;
    auto cell = h.exec("a", "print('never')");
    BOOST_REQUIRE(h.starting(1));
    // The start is held in the job on the blocking pool; the runtime's
    // destructor waits for that job, so release it from another thread.
    std::thread releaser([&] {
      std::this_thread::sleep_for(milliseconds{300});
      h.release();
    });
    h.rt.reset();
    releaser.join();
  }
  BOOST_TEST(eventually([&] {
    return children() == 0 && test::open_fds() <= fds;
  }, 10), "children " << children() << ", fds " << test::open_fds()
          << " (baseline " << fds << "):" << test::list_fds());
}
