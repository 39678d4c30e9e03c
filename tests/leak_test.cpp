#define BOOST_TEST_MODULE leak
#include <boost/test/unit_test.hpp>

// Resource leak check (docs/testing.md, "Soak and leaks"): 10,000
// execute_code cells (some calling tools from the script over RPC, with
// kernel restarts along the way) and 10,000 direct tool calls through one
// runtime. Afterwards open fds, threads, child processes and RSS must be
// back at their baselines within the bounds below. The baseline is taken
// after a warm-up, so pools, caches and the pre-started kernel are in it.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <malloc.h>
#include <unistd.h>

#include "base/json.hpp"
#include "runtime/runtime.hpp"
#include "tests/support/proc_counts.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mibyan;
using namespace std::chrono;

namespace {

// Bounds over the baseline after everything is closed.
constexpr long fd_slack = 4;
constexpr long thread_slack = 4;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
// Sanitizer allocators keep freed memory in quarantine: RSS is reported,
// not bounded.
constexpr long rss_slack_kib = -1;
#else
constexpr long rss_slack_kib = 64 * 1024;
#endif

using test::children;
using test::open_fds;
long threads() { return test::thread_count(); }

long rss_kib() {
  std::ifstream in{"/proc/self/status"};
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0)
      return std::atol(line.c_str() + 6);
  return 0;
}

struct snapshot {
  long fds, threads, kids, zombies, rss;
};

snapshot take() {
  auto c = children();
  return {open_fds(), threads(), c.live, c.zombies, rss_kib()};
}

std::string show(const snapshot& s) {
  std::ostringstream o;
  o << "fds " << s.fds << ", threads " << s.threads << ", children "
    << s.kids << " (zombies " << s.zombies << "), RSS " << s.rss / 1024
    << " MiB";
  return o.str();
}

// Runs `total` calls made by `make(i)`, at most `width` in flight.
template <class Make>
long run_many(runtime& rt, long total, int width, Make make) {
  std::mutex mtx;
  std::condition_variable cv;
  long in_flight = 0, failures = 0;
  std::map<std::string, long> kinds;
  for (long i = 0; i < total; ++i) {
    {
      std::unique_lock<std::mutex> lk{mtx};
      cv.wait(lk, [&] { return in_flight < width; });
      ++in_flight;
    }
    rt.call_tool_async(make(i), [&, i](tool_outcome o) {
      // A reset interrupts the session's cell that is still running: an
      // expected answer (tests/kernel_stop_test.cpp), not a failure.
      auto full = json::parse_members(o.result_json, {"error", "status"});
      const json::value* e = full ? full.v->find("error") : nullptr;
      bool interrupted = full && full.v->get_string("status", "")
                                   == "interrupted";
      bool bad = !full || (e != nullptr && !e->is_null() && !interrupted);
      std::lock_guard<std::mutex> g{mtx};
      if (bad) {
        ++kinds[o.result_json.substr(0, 160)];
        BOOST_TEST_MESSAGE("failed call " << i << " after "
                           << o.duration_us / 1000 << " ms");
      }
      failures += bad ? 1 : 0;
      --in_flight;
      cv.notify_all();
    });
  }
  std::unique_lock<std::mutex> lk{mtx};
  cv.wait(lk, [&] { return in_flight == 0; });
  for (auto& [text, n] : kinds)
    BOOST_TEST_MESSAGE(n << " x " << text);
  return failures;
}

} // namespace

BOOST_AUTO_TEST_CASE(ten_thousand_cells_and_tool_calls_leave_nothing) {
  test::temp_dir home;
  test::temp_dir work;
  std::string lines;
  for (int i = 1; i <= 10000; ++i)
    lines += "line " + std::to_string(i) + "\n";
  work.write("note.txt", lines);
  options opts;
  opts.home = home.path();
  opts.approvals.unattended_mode = "approve";
  std::string err;
  auto made = create_runtime(opts);
  BOOST_REQUIRE_MESSAGE(made, made.error);
  auto rt = std::move(*made);

  const std::vector<std::string> sessions{"leak-a", "leak-b", "leak-c",
                                          "leak-d"};
  auto cell = [&](long i) {
    json::value args;
    // Every 25th cell calls a tool from the script (the RPC path).
    args["code"] = i % 25 == 0
                     ? std::string{"from mibyan_tools import read_file\n"
                                   "print(len(read_file('note.txt', "
                                   "offset=" + std::to_string(i + 1)
                                   + ", limit=1)['content']))"}
                     : "x = " + std::to_string(i) + "\nprint(x * 2)";
    // Every 2,500th cell starts a fresh kernel, in a session of its own: a
    // reset stops the kernel with whatever cells of its session are queued
    // (docs/execute_code.md), and cells i and i + 4 of one session may
    // overlap here.
    if (i % 2500 == 4) {
      args["reset"] = true;
      return tool_call_request{"leak-reset", "c" + std::to_string(i),
                               "execute_code", args.dump(), work.path()};
    }
    return tool_call_request{sessions[static_cast<size_t>(i) % 4],
                             "c" + std::to_string(i), "execute_code",
                             args.dump(), work.path()};
  };
  auto call = [&](long i) {
    json::value args;
    std::string tool = "read_file";
    if (i % 20 == 0) {
      tool = "terminal";
      args["command"] = "echo " + std::to_string(i);
    } else if (i % 20 == 1) {
      tool = "search_files";
      args["pattern"] = "line";
      args["path"] = work.path();
    } else {
      // A different line each time: re-reading unchanged text is refused.
      args["path"] = work / "note.txt";
      args["offset"] = i + 1;
      args["limit"] = 1;
    }
    return tool_call_request{"leak-tools", "t" + std::to_string(i), tool,
                             args.dump(), work.path()};
  };

  // Warm-up: kernels, pools, caches and allocator arenas reach their
  // working size.
  BOOST_REQUIRE_EQUAL(run_many(*rt, 200, 4, cell), 0);
  BOOST_REQUIRE_EQUAL(run_many(*rt, 200, 8, call), 0);
  for (auto& s : sessions)
    rt->close_session(s);
  rt->close_session("leak-reset");
  rt->close_session("leak-tools");
  std::this_thread::sleep_for(milliseconds{500});
  auto base = take();
  BOOST_TEST_MESSAGE("baseline: " << show(base));

  auto t0 = steady_clock::now();
  BOOST_TEST(run_many(*rt, 10000, 4, cell) == 0);
  auto mid = take();
  BOOST_TEST_MESSAGE("after 10,000 cells: " << show(mid));
  BOOST_TEST(run_many(*rt, 10000, 8, call) == 0);
  auto busy = take();
  BOOST_TEST_MESSAGE("after 10,000 tool calls: " << show(busy));
  BOOST_TEST_MESSAGE("work took "
                     << duration_cast<milliseconds>(steady_clock::now() - t0)
                          .count()
                     << " ms");

  for (auto& s : sessions)
    rt->close_session(s);
  rt->close_session("leak-reset");
  rt->close_session("leak-tools");
  // Kernels die asynchronously: wait (bounded) for the counts to settle.
  snapshot end = take();
  for (int i = 0; i < 300; ++i) {
    end = take();
    if (end.kids <= base.kids && end.zombies == 0
        && end.fds <= base.fds + fd_slack
        && end.threads <= base.threads + thread_slack)
      break;
    std::this_thread::sleep_for(milliseconds{100});
  }
  BOOST_TEST_MESSAGE("closed: " << show(end));
  BOOST_TEST(end.fds <= base.fds + fd_slack);
  BOOST_TEST(end.threads <= base.threads + thread_slack);
  BOOST_TEST(end.kids <= base.kids);
  BOOST_TEST(end.zombies == 0);
  if (rss_slack_kib >= 0)
    BOOST_TEST(end.rss <= base.rss + rss_slack_kib);

  rt.reset();
  auto after = take();
  BOOST_TEST_MESSAGE("runtime destroyed: " << show(after));
  BOOST_TEST(after.kids == 0);
  BOOST_TEST(after.zombies == 0);
}

// Every kernel and tool call that ends gives back its memory: 150 sessions
// each start a kernel, run one cell that calls a tool over RPC, and are
// closed. Measured as the heap in use (mallinfo2: allocated bytes, not what
// the allocator keeps). Measured on this test: +16 KiB with the deadlines
// as exit timers, +462 KiB when they were delayed messages, which kept each
// ended broker and invocation object alive until its deadline
// (docs/architecture.md, "Timers"); the bound sits between the two.
BOOST_AUTO_TEST_CASE(ended_kernels_give_back_their_memory) {
  test::temp_dir home;
  options opts;
  opts.home = home.path();
  opts.approvals.unattended_mode = "approve";
  opts.code_execution.prestart_kernels = 0;
  std::string err;
  auto made2 = create_runtime(opts);
  BOOST_REQUIRE_MESSAGE(made2, made2.error);
  auto rt = std::move(*made2);
  auto one = [&](const std::string& session) {
    json::value args;
    // A tool call from the script: the RPC listener and a connection.
    args["code"] = "from mibyan_tools import terminal\n"
                   "print(terminal('echo 42')['output'])";
    auto out = rt->call_tool({session, "c", "execute_code", args.dump(), ""});
    BOOST_REQUIRE_MESSAGE(out.result_json.find("42") != std::string::npos,
                          out.result_json);
    rt->close_session(session);
  };
  auto settle = [&] {
    // Kernels end asynchronously after close_session.
    for (int i = 0; i < 100; ++i) {
      auto stats = json::parse(rt->kernel_stats());
      if (stats && stats.v->get_int("kernels", -1) == 0)
        break;
      std::this_thread::sleep_for(milliseconds{50});
    }
    std::this_thread::sleep_for(milliseconds{300});
  };
  for (int i = 0; i < 20; ++i)
    one("warm-" + std::to_string(i));
  settle();
  auto before = ::mallinfo2();
  for (int i = 0; i < 150; ++i)
    one("k-" + std::to_string(i));
  settle();
  auto after = ::mallinfo2();
  auto used = [](const struct mallinfo2& m) {
    return static_cast<long>((m.uordblks + m.hblkhd) / 1024);
  };
  BOOST_TEST_MESSAGE("heap in use: " << used(before) << " KiB before, "
                                     << used(after) << " KiB after");
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  BOOST_TEST(used(after) <= used(before) + 256);
#endif
}
