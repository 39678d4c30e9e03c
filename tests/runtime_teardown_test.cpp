#define BOOST_TEST_MODULE runtime_teardown
#include <boost/test/unit_test.hpp>

// A runtime destroyed while its kernels are alive (idle session kernels,
// the pre-started spare, a cell still running) leaves nothing behind in
// the process: no open fd, no child process, no zombie
// (docs/testing.md, "Soak and leaks"). Applications that create and
// destroy runtimes repeatedly depend on it, so the count must come back
// exactly, and stay there over several runtimes.

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <sys/stat.h>

#include "base/json.hpp"
#include "runtime/runtime.hpp"
#include "tests/support/proc_counts.hpp"
#include "tests/support/kernel_options.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mibyan;
using namespace std::chrono;

namespace {

using test::list_fds;
using test::open_fds;

long children() {
  auto c = test::children();
  return c.live + c.zombies;
}

struct session_runtime {
  test::temp_dir home;
  test::temp_dir work;
  std::unique_ptr<runtime> rt;

  explicit session_runtime(int prestart) {
    auto opts = test::kernel_test_options(home.path(), prestart);
    std::string err;
    auto made = create_runtime(opts);
    BOOST_REQUIRE_MESSAGE(made, made.error);
    rt = std::move(*made);
  }

  tool_call_request exec(const std::string& session, const std::string& code) {
    json::value args;
    args["code"] = code;
    return {session, "c", "execute_code", args.dump(), work.path()};
  }

  void run(const std::string& session, const std::string& code) {
    auto out = rt->call_tool(exec(session, code));
    auto p = json::parse(out.result_json);
    BOOST_REQUIRE_MESSAGE(p && p.v->get_string("status", "") == "success",
                          out.result_json);
  }
};

// Waits (bounded) for fds and children to come back to the baseline; the
// kernels' process groups are reaped by blocking-pool jobs that the
// runtime's destructor waits for, so this normally holds at once.
bool settled(long fds, std::string* why) {
  for (int i = 0; i < 100; ++i) {
    if (open_fds() <= fds && children() == 0)
      return true;
    std::this_thread::sleep_for(milliseconds{50});
  }
  *why = "fds " + std::to_string(open_fds()) + " (baseline "
         + std::to_string(fds) + "), children " + std::to_string(children())
         + ";" + list_fds();
  return false;
}

long baseline_fds() {
  // The first runtime of a process installs process-wide state that lives
  // as long as the process (the SIGTERM watcher's pipe); count after it.
  { session_runtime warm{0}; }
  return open_fds();
}

} // namespace

BOOST_AUTO_TEST_CASE(idle_kernels_and_the_spare_leave_no_fd) {
  auto base = baseline_fds();
  BOOST_TEST_MESSAGE("baseline fds " << base << ":" << list_fds());
  {
    session_runtime s{1};
    s.run("a", "x = 1");
    s.run("b", "from mibyan_tools import terminal\nterminal('true')");
    s.run("c", "print('c')");
  }
  std::string why;
  BOOST_TEST(settled(base, &why), why);
}

BOOST_AUTO_TEST_CASE(a_running_cell_is_answered_and_leaves_no_fd) {
  auto base = baseline_fds();
  std::future<tool_outcome> running;
  {
    session_runtime s{0};
    s.run("idle", "y = 2");
    auto p = std::make_shared<std::promise<tool_outcome>>();
    running = p->get_future();
    auto mark = s.work / "started";
    s.rt->call_tool_async(
      s.exec("busy", "open('" + mark + "', 'w').close()\nimport time\n"
                     "time.sleep(120)"),
      [p](tool_outcome o) { p->set_value(std::move(o)); });
    struct stat st{};
    for (int i = 0; i < 600 && ::stat(mark.c_str(), &st) != 0; ++i)
      std::this_thread::sleep_for(milliseconds{50});
    BOOST_REQUIRE_MESSAGE(::stat(mark.c_str(), &st) == 0,
                          "the sleeping cell never started");
  }
  // The cell's caller got an answer, not silence.
  BOOST_REQUIRE(running.wait_for(seconds{30}) == std::future_status::ready);
  auto p = json::parse(running.get().result_json);
  BOOST_TEST((p && p.v->is_object()));
  std::string why;
  BOOST_TEST(settled(base, &why), why);
}

BOOST_AUTO_TEST_CASE(repeated_runtimes_do_not_accumulate_fds) {
  auto base = baseline_fds();
  for (int round = 0; round < 4; ++round) {
    session_runtime s{1};
    s.run("r" + std::to_string(round), "print(1)");
  }
  std::string why;
  BOOST_TEST(settled(base, &why), why);
}

// Sessions closed (or interrupted) while their kernels start: a kernel
// broker that ends before its RPC listener ever reached the event loop
// must still close the listener.
BOOST_AUTO_TEST_CASE(kernels_stopped_while_starting_leave_no_fd) {
  auto base = baseline_fds();
  {
    session_runtime s{1};
    std::vector<std::future<tool_outcome>> calls;
    for (int i = 0; i < 40; ++i) {
      auto p = std::make_shared<std::promise<tool_outcome>>();
      calls.push_back(p->get_future());
      auto sid = "starting-" + std::to_string(i);
      s.rt->call_tool_async(s.exec(sid, "print(1)"),
                            [p](tool_outcome o) { p->set_value(std::move(o)); });
      if (i % 2 == 0)
        s.rt->close_session(sid);
      else
        s.rt->interrupt(sid, "test");
    }
    for (auto& f : calls)
      BOOST_REQUIRE(f.wait_for(seconds{60}) == std::future_status::ready);
  }
  std::string why;
  BOOST_TEST(settled(base, &why), why);
}

// A runtime made on one thread and destroyed on another while the first
// still lives, as an application with a worker thread does: spawning
// leaves a reference to CAF's logger on the spawning thread, and the actor
// system's destructor waits for all of them (actors/outside_spawn.hpp).
// Before the fix this destruction never returned.
BOOST_AUTO_TEST_CASE(a_runtime_destroyed_on_another_thread_returns) {
  std::unique_ptr<session_runtime> s;
  std::promise<void> made, finish;
  auto made_f = made.get_future();
  auto finish_f = finish.get_future();
  std::thread maker([&] {
    s = std::make_unique<session_runtime>(1); // the spare starts on the pool
    s->run("a", "x = 1");
    made.set_value();
    finish_f.wait(); // this thread outlives the runtime
  });
  made_f.wait();
  auto done = std::make_shared<std::promise<void>>();
  auto done_f = done->get_future();
  std::thread([&s, done] {
    s->rt.reset();
    done->set_value();
  }).detach();
  bool returned = done_f.wait_for(seconds{60}) == std::future_status::ready;
  finish.set_value();
  maker.join();
  if (!returned) {
    // The destructor hangs for good: report and leave without unwinding.
    std::fprintf(stderr, "runtime destructor did not return within 60 s\n");
    std::_Exit(1);
  }
  // The kernels' groups are reaped by pool jobs the destructor waited for.
  std::string why;
  BOOST_TEST(settled(test::open_fds(), &why), why);
}
