#define BOOST_TEST_MODULE runtime
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "mibyan/actors.hpp"
#include "runtime/runtime.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wait_until.hpp"
#include "tools/registry.hpp"

using namespace mibyan;
using namespace std::chrono;

namespace {

// A tool that sleeps for `ms` (polling its cancel flag) and reports whether
// it saw the cancellation. Used to check deadlines, interrupts and that
// blocking tools do not block each other.
std::atomic<int> cancelled_seen{0};
// Calls of test_sleep that began.
std::atomic<int> sleeps_started{0};

class sleep_tool final : public tool {
public:
  const char* name() const override { return "test_sleep"; }
  const char* toolset() const override { return "test"; }
  std::string description() const override { return "sleeps"; }
  json::value schema() const override {
    return *json::parse(R"({"type":"object","properties":{
      "ms":{"type":"integer"},"deadline_ms":{"type":"integer"}},
      "required":["ms"]})").v;
  }
  milliseconds deadline(const json::value& args,
                        const options&) const override {
    return milliseconds{args.get_int("deadline_ms", 5000)};
  }
  json::value run(const json::value& args,
                  const tool_context& ctx) const override {
    ++sleeps_started;
    auto until = steady_clock::now() + milliseconds{args.get_int("ms", 0)};
    while (steady_clock::now() < until) {
      if (ctx.is_cancelled()) {
        ++cancelled_seen;
        return error_result("cancelled");
      }
      std::this_thread::sleep_for(milliseconds{5});
    }
    json::value r;
    r["slept"] = args.get_int("ms", 0);
    return r;
  }
};

class throwing_tool final : public tool {
public:
  const char* name() const override { return "test_throw"; }
  const char* toolset() const override { return "test"; }
  std::string description() const override { return "throws"; }
  json::value schema() const override {
    return *json::parse(R"({"type":"object","properties":{}})").v;
  }
  json::value run(const json::value&, const tool_context&) const override {
    throw std::runtime_error("boom");
  }
};

struct fixture {
  test::temp_dir home;
  std::unique_ptr<runtime> rt;
  fixture() {
    options opts;
    opts.home = home.path();
    opts.runtime.blocking_threads = 8;
    std::vector<std::unique_ptr<tool>> extra;
    extra.push_back(std::make_unique<sleep_tool>());
    extra.push_back(std::make_unique<throwing_tool>());
    std::string err;
    auto made = create_runtime(opts, std::move(extra));
    BOOST_REQUIRE_MESSAGE(made, made.error);
    rt = std::move(*made);
  }
  json::value call(const std::string& tool, const std::string& args,
                   const std::string& session = "s") {
    auto out = rt->call_tool({session, "c", tool, args, ""});
    auto parsed = json::parse(out.result_json);
    BOOST_REQUIRE_MESSAGE(parsed, out.result_json);
    return *parsed.v;
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(runtime_suite, fixture)

BOOST_AUTO_TEST_CASE(message_types_round_trip) {
  BOOST_TEST(message_self_test(actor_system_of(*rt)).empty());
}

BOOST_AUTO_TEST_CASE(call_reaches_tool) {
  auto r = call("test_sleep", R"({"ms":1})");
  BOOST_TEST(r["slept"].as_int() == 1);
}

BOOST_AUTO_TEST_CASE(dispatch_errors_are_results) {
  auto r = call("no_such_tool", "{}");
  BOOST_TEST(r.get_string("error").find("Unknown tool: no_such_tool")
             != std::string::npos);
  BOOST_TEST(r.get_string("error").find("test_sleep") != std::string::npos);
  r = call("test_sleep", "not json");
  BOOST_TEST(r.get_string("error") == "Invalid tool arguments");
  r = call("test_sleep", "[1,2]");
  BOOST_TEST(r.get_string("error") == "Invalid tool arguments");
  r = call("test_sleep", R"({"ms":"soon"})");
  BOOST_TEST(r.get_string("error").find("'ms'") != std::string::npos);
  r = call("test_throw", "{}");
  BOOST_TEST(r.get_string("error")
             == "[TOOL_ERROR] Tool execution failed: boom");
}

BOOST_AUTO_TEST_CASE(deadline_cancels_the_call) {
  cancelled_seen = 0;
  auto start = steady_clock::now();
  auto out = rt->call_tool({"s", "c", "test_sleep",
                            R"({"ms":5000,"deadline_ms":200})", ""});
  auto took = duration_cast<milliseconds>(steady_clock::now() - start);
  BOOST_TEST(out.timed_out);
  BOOST_TEST(took.count() < 2000);
  BOOST_TEST(out.result_json.find("deadline") != std::string::npos);
  // The tool itself observes the cancel flag and stops.
  for (int i = 0; i < 100 && cancelled_seen == 0; ++i)
    std::this_thread::sleep_for(milliseconds{10});
  BOOST_TEST(cancelled_seen.load() == 1);
}

BOOST_AUTO_TEST_CASE(interrupt_cancels_only_that_session) {
  std::promise<tool_outcome> a, b;
  auto before = sleeps_started.load();
  rt->call_tool_async({"victim", "1", "test_sleep", R"({"ms":3000})", ""},
                      [&](tool_outcome o) { a.set_value(std::move(o)); });
  rt->call_tool_async({"bystander", "2", "test_sleep", R"({"ms":300})", ""},
                      [&](tool_outcome o) { b.set_value(std::move(o)); });
  // Both run when the interrupt comes.
  BOOST_REQUIRE(test::wait_until([&] { return sleeps_started >= before + 2; }));
  rt->interrupt("victim", "user sent a new message");
  auto ra = a.get_future().get();
  auto rb = b.get_future().get();
  BOOST_TEST(ra.timed_out);
  BOOST_TEST(ra.result_json.find("user sent a new message")
             != std::string::npos);
  BOOST_TEST(!rb.timed_out);
  BOOST_TEST(rb.result_json.find("\"slept\":300") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(blocking_tools_run_concurrently) {
  // Eight 300 ms calls on a 2-core machine: if they blocked scheduler
  // threads they would take >= 1.2 s; on the blocking pool they overlap.
  std::vector<std::promise<tool_outcome>> ps(8);
  auto start = steady_clock::now();
  for (size_t i = 0; i < ps.size(); ++i)
    rt->call_tool_async({"s" + std::to_string(i), "c", "test_sleep",
                         R"({"ms":300})", ""},
                        [&, i](tool_outcome o) { ps[i].set_value(o); });
  for (auto& p : ps)
    BOOST_TEST(p.get_future().get().result_json.find("slept")
               != std::string::npos);
  auto took = duration_cast<milliseconds>(steady_clock::now() - start);
  BOOST_TEST(took.count() < 1000);
}

BOOST_AUTO_TEST_SUITE_END()
