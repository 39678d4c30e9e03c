// The warm-cell fast path (docs/benchmarks.md, "Bridge, warm cell and CLI
// start-up"): the runner's compile cache and reused capture streams, the
// kernel broker's one deadline timer for back-to-back cells, and the
// runtime's call facade. Functional checks only; no timings.
#define BOOST_TEST_MODULE warm_cell
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <future>
#include <string>
#include <thread>

#include "node/runtime.hpp"
#include "tests/support/kernel_harness.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mibyan;
using namespace mibyan::test;
using namespace std::chrono_literals;

namespace {

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

struct runtime_fixture {
  temp_dir home;
  temp_dir work;
  std::unique_ptr<runtime> rt;

  void start(int64_t timeout_seconds = 300) {
    options opts;
    opts.home = home.path();
    opts.code_execution.prestart_kernels = 0;
    opts.code_execution.timeout = timeout_seconds;
    if (const char* sb = std::getenv("MIBYAN_TEST_SANDBOX"); sb && *sb)
      opts.code_execution.sandbox = sb;
    opts.approvals.unattended_mode = "approve";
    std::string err;
    rt = runtime::create(opts, &err);
    BOOST_REQUIRE_MESSAGE(rt != nullptr, err);
  }

  json::value exec(const std::string& code) {
    json::value args;
    args["code"] = code;
    auto out = rt->call_tool({"s1", "call", "execute_code", args.dump(),
                              work.path()});
    auto parsed = json::parse(out.result_json);
    BOOST_REQUIRE_MESSAGE(parsed, out.result_json);
    return *parsed.v;
  }
};

} // namespace

BOOST_AUTO_TEST_SUITE(runner_compile_cache)

// The same text runs many times (the cache serves it from the third run)
// and always sees the globals of the moment, also through a function the
// cell defines.
BOOST_AUTO_TEST_CASE(same_text_runs_against_the_current_globals) {
  kernel_harness k;
  const std::string cell = "def f():\n    return x * 10\nprint(x, f())";
  for (int x = 1; x <= 5; ++x) {
    BOOST_REQUIRE(k.run("x = " + std::to_string(x)).ok);
    auto f = k.run(cell);
    BOOST_REQUIRE(f.ok);
    BOOST_TEST(f.status() == "ok");
    BOOST_TEST(f.out() == std::to_string(x) + " " + std::to_string(x * 10)
                            + "\n");
  }
  // A name the cached text needs can disappear between runs.
  BOOST_REQUIRE(k.run("del x").ok);
  auto g = k.run(cell);
  BOOST_TEST(g.status() == "error");
  BOOST_TEST(contains(g.trace(), "NameError"));
}

// Compilation warnings are printed on every run, as by a real interpreter:
// a text whose compilation warns is never served from the cache.
BOOST_AUTO_TEST_CASE(a_text_that_warns_at_compile_time_warns_every_time) {
  kernel_harness k;
  const std::string cell = "x = 1\nprint(x is 1)";
  for (int i = 0; i < 5; ++i) {
    auto f = k.run(cell);
    BOOST_REQUIRE(f.ok);
    BOOST_TEST(f.out() == "True\n");
    BOOST_TEST(contains(f.err(), "SyntaxWarning"), "run " << i << ": "
                                                         << f.err());
  }
}

BOOST_AUTO_TEST_CASE(a_syntax_error_stays_an_error) {
  kernel_harness k;
  for (int i = 0; i < 4; ++i) {
    auto f = k.run("def (:");
    BOOST_REQUIRE(f.ok);
    BOOST_TEST(f.status() == "error");
    BOOST_TEST(contains(f.trace(), "SyntaxError"));
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(runner_capture_streams)

// A capture stream is reused only when nothing refers to it: a cell that
// kept its sys.stdout (or its buffer, or a bound write) still has its own
// output there, and later cells' output never lands in it.
BOOST_AUTO_TEST_CASE(a_kept_stream_is_never_reused) {
  kernel_harness k;
  auto a = k.run("import sys\nkeep = sys.stdout\nw = sys.stderr.write\n"
                 "b = sys.stdout.buffer\nprint('one')");
  BOOST_REQUIRE(a.ok);
  BOOST_TEST(a.out() == "one\n");
  for (int i = 0; i < 3; ++i) {
    auto f = k.run("print('two')\nimport sys\n"
                   "print('same', sys.stdout is keep)");
    BOOST_TEST(f.out() == "two\nsame False\n");
  }
  auto c = k.run("print(repr(keep.value()))");
  BOOST_TEST(c.out() == "'one\\n'\n");
}

// A reused stream starts empty, with zero totals and not clipped.
BOOST_AUTO_TEST_CASE(a_reused_stream_starts_empty) {
  kernel_harness k;
  auto a = k.run("print('x' * 10)\nimport sys\nprint('e', file=sys.stderr)");
  BOOST_TEST(a.out() == "xxxxxxxxxx\n");
  for (int i = 0; i < 3; ++i) {
    auto f = k.run("pass");
    BOOST_REQUIRE(f.ok);
    BOOST_TEST(f.out().empty());
    BOOST_TEST(f.err().empty());
    BOOST_TEST(f.body.get_int("stdout_total", -1) == 0);
    BOOST_TEST(f.body.get_int("stderr_total", -1) == 0);
    BOOST_TEST(!f.body.get_bool("stdout_clipped", true));
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(runtime_warm_path, runtime_fixture)

// The broker arms a deadline timer only when none fires before the new
// cell's deadline; a timer left from an earlier cell fires early for this
// one and must re-arm, not end the cell before its own timeout.
BOOST_AUTO_TEST_CASE(a_cell_gets_its_whole_timeout_after_earlier_cells) {
  start(3);
  BOOST_TEST(exec("pass").get_string("status") == "success");
  std::this_thread::sleep_for(1500ms);
  // Armed for the first cell (about 1.5 s from now): not this one's end.
  auto r = exec("import time\nt = time.monotonic()\ntime.sleep(2.2)\n"
                "print('slept')");
  BOOST_TEST(r.get_string("status") == "success", r.dump());
  BOOST_TEST(contains(r.get_string("output"), "slept"));
  // And the timeout still ends a cell that runs past it.
  auto t = exec("import time\ntime.sleep(60)");
  BOOST_TEST(t.get_string("status") == "timeout", t.dump());
}

// Cells chained from call_tool_async's callback (the event-based path):
// each answer arrives once, in order, and the kernel is reused.
BOOST_AUTO_TEST_CASE(event_based_callers_chain_cells) {
  start();
  struct chain {
    runtime* rt;
    std::string cwd;
    int left = 20;
    std::vector<std::string> outputs;
    std::promise<void> done;
    void next() {
      json::value args;
      args["code"] = "n = globals().get('n', 0) + 1\nprint(n)";
      rt->call_tool_async({"s1", "e", "execute_code", args.dump(), cwd},
                          [this](tool_outcome o) {
        auto r = json::parse(o.result_json);
        outputs.push_back(r ? r.v->get_string("output") : o.result_json);
        if (--left > 0)
          next();
        else
          done.set_value();
      });
    }
  } c{rt.get(), work.path()};
  auto f = c.done.get_future();
  c.next();
  BOOST_REQUIRE(f.wait_for(120s) == std::future_status::ready);
  BOOST_REQUIRE(c.outputs.size() == 20u);
  for (int i = 0; i < 20; ++i)
    BOOST_TEST(c.outputs[i] == std::to_string(i + 1) + "\n");
}

// A call still running when the runtime goes is answered (not left
// waiting), and calls after that get an error at once.
BOOST_AUTO_TEST_CASE(pending_calls_are_answered_when_the_runtime_goes) {
  start();
  auto marker = work.path() + "/started";
  std::promise<tool_outcome> p;
  auto f = p.get_future();
  json::value args;
  args["code"] = "open(" + json::value(marker).dump()
                 + ", 'w').close()\nimport time\ntime.sleep(60)";
  rt->call_tool_async({"s1", "long", "execute_code", args.dump(),
                       work.path()},
                      [&p](tool_outcome o) { p.set_value(std::move(o)); });
  for (int i = 0; i < 600 && !std::ifstream(marker).good(); ++i)
    std::this_thread::sleep_for(50ms);
  BOOST_REQUIRE(std::ifstream(marker).good());
  rt.reset();
  BOOST_REQUIRE(f.wait_for(60s) == std::future_status::ready);
  auto out = f.get();
  BOOST_TEST(!out.result_json.empty());
}

BOOST_AUTO_TEST_SUITE_END()
