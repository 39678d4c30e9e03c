// The tool invocation actor (actors/tool_invocation.hpp) in simulated time
// (tests/support/sim_fixture.hpp): a call that never finishes is answered
// with a timeout exactly at its deadline and its cancel flag is raised; an
// interrupt answers at once; the reported duration comes from the injected
// clock.
#define BOOST_TEST_MODULE sim_tool_invocation
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "actors/services.hpp"
#include "actors/tool_invocation.hpp"
#include "base/blocking_pool.hpp"
#include "base/json.hpp"
#include "tools/tool.hpp"

#include "tests/support/sim_fixture.hpp"

using namespace mibyan;
using namespace std::chrono;
using mibyan::test::wait_until;

namespace {

// What the stuck tool saw, shared with the test (the tool runs on a pool
// thread).
struct stuck_probe {
  std::atomic<int> started{0};
  std::atomic<int> saw_cancel{0};
  std::atomic<int> returned{0};
};

// Runs until its call is cancelled (or 60 s of real time, so a broken test
// does not hang). Its deadline is `seconds` from the arguments (default 5).
class stuck_tool final : public tool {
public:
  explicit stuck_tool(std::shared_ptr<stuck_probe> probe)
    : probe_(std::move(probe)) {
  }
  const char* name() const override { return "stuck"; }
  const char* toolset() const override { return "test"; }
  std::string description() const override { return "never finishes"; }
  json::value schema() const override {
    json::value s;
    s["type"] = "object";
    s["properties"]["seconds"] = schema_property("integer", "deadline");
    return s;
  }
  milliseconds deadline(const json::value& args,
                        const options&) const override {
    auto s = args.find("seconds");
    return seconds(s != nullptr && s->is_number() ? s->as_int() : 5);
  }
  json::value run(const json::value&, const tool_context& ctx) const override {
    probe_->started.fetch_add(1);
    auto until = steady_clock::now() + seconds(60);
    while (!ctx.is_cancelled() && steady_clock::now() < until)
      std::this_thread::sleep_for(milliseconds(1));
    if (ctx.is_cancelled())
      probe_->saw_cancel.fetch_add(1);
    probe_->returned.fetch_add(1);
    json::value r;
    r["output"] = "finished late";
    return r;
  }

private:
  std::shared_ptr<stuck_probe> probe_;
};

struct fixture : mibyan::test::sim_fixture {
  std::shared_ptr<stuck_probe> probe = std::make_shared<stuck_probe>();
  services_ptr svc;

  fixture() {
    auto s = std::make_shared<runtime_services>();
    s->pool = std::make_unique<blocking_pool>(2);
    s->tools.add(std::make_unique<stuck_tool>(probe));
    s->clock = clock;
    svc = s;
  }

  // The pool's threads are joined here, on the test's thread: a job that
  // still holds the services when the test ends would otherwise release the
  // last reference on a pool thread, whose pool would then join itself.
  ~fixture() { svc->pool->shutdown(); }

  tool_request call(const std::string& args) {
    tool_request req;
    req.session_id = "s1";
    req.call_id = "call-1";
    req.tool = "stuck";
    req.args_json = args;
    return req;
  }

  // The pool thread ran the tool and it returned: no message of it can
  // reach an actor of this system any more (the invocation ended first).
  void wait_tool_returned() {
    BOOST_REQUIRE(wait_until([&] { return probe->returned.load() == 1; }));
  }
};

json::value parse(const std::string& text) {
  auto r = json::parse(text);
  BOOST_REQUIRE_MESSAGE(r, text);
  return std::move(*r.v);
}

} // namespace

BOOST_FIXTURE_TEST_CASE(deadline_fires_exactly_at_the_tools_limit, fixture) {
  auto inv = spawn_tool_invocation(self.ptr(), svc);
  auto box = ask<tool_response>(inv, invoke_atom_v, call("{}"));
  BOOST_REQUIRE(wait_until([&] { return probe->started.load() == 1; }));
  // Just before the 5 s deadline: no answer, the call keeps running.
  advance(milliseconds(4900));
  BOOST_CHECK(!box->done());
  BOOST_CHECK_EQUAL(probe->saw_cancel.load(), 0);
  // At the deadline: a timeout answer, and the tool is told to stop.
  advance(milliseconds(100));
  BOOST_REQUIRE(box->value);
  BOOST_CHECK(box->value->timed_out);
  BOOST_CHECK_EQUAL(box->value->call_id, "call-1");
  auto r = parse(box->value->result_json);
  BOOST_CHECK_EQUAL(r["status"].as_string(), "timeout");
  // The seconds and the duration are the injected clock's, not the
  // milliseconds of real time the test took.
  BOOST_CHECK_MESSAGE(r["error"].as_string().find("(5 s)")
                        != std::string::npos,
                      r.dump());
  BOOST_CHECK_EQUAL(box->value->duration_us, 5'000'000);
  wait_tool_returned();
  BOOST_CHECK_EQUAL(probe->saw_cancel.load(), 1);
}

BOOST_FIXTURE_TEST_CASE(deadline_follows_the_arguments, fixture) {
  auto inv = spawn_tool_invocation(self.ptr(), svc);
  auto box = ask<tool_response>(inv, invoke_atom_v,
                                call(R"({"seconds": 120})"));
  BOOST_REQUIRE(wait_until([&] { return probe->started.load() == 1; }));
  advance(seconds(119));
  BOOST_CHECK(!box->done());
  advance(seconds(1));
  BOOST_REQUIRE(box->value);
  BOOST_CHECK(box->value->timed_out);
  BOOST_CHECK(parse(box->value->result_json)["error"].as_string().find(
                "(120 s)")
              != std::string::npos);
  wait_tool_returned();
}

BOOST_FIXTURE_TEST_CASE(interrupt_answers_at_once_and_cancels, fixture) {
  auto inv = spawn_tool_invocation(self.ptr(), svc);
  auto box = ask<tool_response>(inv, invoke_atom_v, call("{}"));
  BOOST_REQUIRE(wait_until([&] { return probe->started.load() == 1; }));
  advance(seconds(1));
  BOOST_CHECK(!box->done());
  self->send(inv, interrupt_atom_v, std::string{"the user sent a new message"});
  run_all();
  BOOST_REQUIRE(box->value);
  BOOST_CHECK(box->value->timed_out);
  auto r = parse(box->value->result_json);
  BOOST_CHECK_EQUAL(r["status"].as_string(), "cancelled");
  BOOST_CHECK(r["error"].as_string().find("the user sent a new message")
              != std::string::npos);
  BOOST_CHECK_EQUAL(box->value->duration_us, 1'000'000);
  wait_tool_returned();
  BOOST_CHECK_EQUAL(probe->saw_cancel.load(), 1);
  // The invocation ended with its answer: its deadline fires nothing.
  advance(seconds(10));
}

BOOST_FIXTURE_TEST_CASE(oversized_arguments_are_refused_without_a_run,
                        fixture) {
  auto inv = spawn_tool_invocation(self.ptr(), svc);
  std::string big(svc->cfg.tools.max_argument_bytes + 10, 'x');
  auto box = ask<tool_response>(inv, invoke_atom_v,
                                call(R"({"pad": ")" + big + R"("})"));
  BOOST_REQUIRE(box->value);
  BOOST_CHECK(!box->value->timed_out);
  BOOST_CHECK(parse(box->value->result_json).find("error") != nullptr);
  BOOST_CHECK_EQUAL(probe->started.load(), 0);
}
