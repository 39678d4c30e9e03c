#define BOOST_TEST_MODULE kernel_stop
#include <boost/test/unit_test.hpp>

// A kernel stopped while one of its cells runs (execute_code with
// `reset: true` from a concurrent call of the same session, or
// close_session) answers that cell at once as interrupted, and cells queued
// behind it with an error, instead of leaving their callers waiting for the
// registry's request timeout (the cell timeout plus 35 s). Found by
// leak_test (docs/testing.md, "Soak and leaks").

#include <chrono>
#include <future>
#include <string>
#include <thread>

#include <sys/stat.h>

#include "base/json.hpp"
#include "runtime/runtime.hpp"
#include "tests/support/kernel_options.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mibyan;
using namespace std::chrono;

namespace {

struct fixture {
  test::temp_dir home;
  test::temp_dir work;
  std::unique_ptr<runtime> rt;

  fixture() {
    auto opts = test::kernel_test_options(home.path());
    std::string err;
    auto made = create_runtime(opts);
    BOOST_REQUIRE_MESSAGE(made, made.error);
    rt = std::move(*made);
  }

  tool_call_request exec(const std::string& code, bool reset = false,
                         const std::string& session = "s") {
    json::value args;
    args["code"] = code;
    if (reset)
      args["reset"] = true;
    return {session, "c", "execute_code", args.dump(), work.path()};
  }

  // Starts a cell that marks a file and then sleeps; returns its future
  // once the mark shows that it runs.
  std::future<tool_outcome> start_sleeper(const std::string& mark) {
    auto p = std::make_shared<std::promise<tool_outcome>>();
    auto f = p->get_future();
    rt->call_tool_async(
      exec("open('" + mark + "', 'w').close()\nimport time\ntime.sleep(120)"),
      [p](tool_outcome o) { p->set_value(std::move(o)); });
    struct stat st{};
    for (int i = 0; i < 600 && ::stat((work / mark).c_str(), &st) != 0; ++i)
      std::this_thread::sleep_for(milliseconds{50});
    BOOST_REQUIRE_MESSAGE(::stat((work / mark).c_str(), &st) == 0,
                          "the sleeping cell never started");
    return f;
  }
};

json::value parse(const tool_outcome& o) {
  auto p = json::parse(o.result_json);
  BOOST_REQUIRE_MESSAGE(p && p.v->is_object(), o.result_json);
  return *p.v;
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(kernel_stop, fixture)

BOOST_AUTO_TEST_CASE(reset_answers_the_running_cell) {
  auto sleeper = start_sleeper("started");
  // A queued cell behind the sleeper, then the reset.
  auto queued = std::make_shared<std::promise<tool_outcome>>();
  auto queued_f = queued->get_future();
  rt->call_tool_async(exec("print('queued')"),
                      [queued](tool_outcome o) { queued->set_value(o); });
  auto fresh = parse(rt->call_tool(exec("print('fresh')", true)));
  BOOST_TEST(fresh.get_string("output", "").find("fresh")
             != std::string::npos);
  // The old code answered only after the cell timeout plus 35 s.
  BOOST_REQUIRE_MESSAGE(sleeper.wait_for(seconds{60})
                          == std::future_status::ready,
                        "the running cell of the reset kernel was never "
                        "answered");
  auto r = parse(sleeper.get());
  BOOST_TEST(r.get_string("status", "") == "interrupted");
  BOOST_TEST(r.get_string("output", "").find("reset, evicted or closed")
             != std::string::npos);
  BOOST_REQUIRE(queued_f.wait_for(seconds{60}) == std::future_status::ready);
  // Answered: with an error when it was queued on the old kernel, or run
  // by the fresh one when it reached the registry after the reset.
  auto q = parse(queued_f.get());
  BOOST_TEST(q.find("status") != nullptr);
}

BOOST_AUTO_TEST_CASE(close_session_answers_the_running_cell) {
  auto sleeper = start_sleeper("started2");
  rt->close_session("s");
  BOOST_REQUIRE_MESSAGE(sleeper.wait_for(seconds{60})
                          == std::future_status::ready,
                        "the running cell of the closed session was never "
                        "answered");
  auto r = parse(sleeper.get());
  BOOST_TEST(r.get_string("status", "") == "interrupted");
}

BOOST_AUTO_TEST_SUITE_END()
