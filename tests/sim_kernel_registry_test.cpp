// The kernel registry (actors/kernel_registry.hpp) in simulated time
// (tests/support/sim_fixture.hpp): an idle session kernel is reaped once
// code_execution.kernel_idle_timeout has passed since its last cell, not
// before; a kernel with a cell running is never reaped; kernel processes
// start through the injected launcher, whose failure becomes an error
// result. The kernels are scripted actors (the registry's kernel factory)
// that keep the usage record the way the broker does.
#define BOOST_TEST_MODULE sim_kernel_registry
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <climits>
#include <map>
#include <memory>
#include <string>

#include "actors/kernel.hpp"
#include "actors/kernel_registry.hpp"
#include "actors/services.hpp"
#include "actors/warm_kernels.hpp"
#include "base/blocking_pool.hpp"
#include "base/json.hpp"
#include "kernels/process_launcher.hpp"

#include "tests/support/sim_fixture.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mibyan;
using namespace std::chrono;

namespace {

// Counts kernel starts; refuses them while `refuse` is set.
struct counting_launcher final : process_launcher {
  mutable std::atomic<int> kernels{0};
  std::atomic<bool> refuse{false};

  subprocess_result run(const subprocess_options&) const override {
    subprocess_result r;
    r.spawn_error = "this test starts no commands";
    return r;
  }
  result<kernel_process>
  start_kernel(const kernel_spawn_options& opts) const override {
    if (refuse.load())
      return result<kernel_process>::failure(status_code::unavailable,
                                             "no processes in this test");
    kernels.fetch_add(1);
    kernel_process p;
    p.pid = INT_MAX - 1; // no such process: nothing may signal it
    p.cwd = opts.cwd;
    return p;
  }
};

// The scripted kernels: cells answer at once, except code "hold", which
// stays running until the test sends (done_atom) to its kernel.
struct kernel_probe {
  int alive = 0;
  int ended = 0;
  std::vector<caf::actor> handles;
};

caf::actor spawn_scripted_kernel(caf::actor_system& sys, services_ptr svc,
                                 kernel_actor_options ko,
                                 std::shared_ptr<kernel_probe> probe) {
  auto usage = ko.usage;
  auto k = sys.spawn([usage, svc, probe](caf::event_based_actor* self)
                       -> caf::behavior {
    ++probe->alive;
    self->attach_functor([probe] {
      --probe->alive;
      ++probe->ended;
    });
    auto held = std::make_shared<
      std::vector<std::pair<caf::typed_response_promise<tool_response>,
                            std::string>>>();
    auto answer = [usage, svc](caf::typed_response_promise<tool_response>& rp,
                               const std::string& call_id) {
      // The broker's order (actors/kernel_broker.hpp): the usage record,
      // then the answer, then the cell leaves `attached`.
      usage->last_answer_ns.store(usage_clock_now(*svc->clock));
      json::value r;
      r["status"] = "success";
      r["output"] = "";
      rp.deliver(tool_response{call_id, "execute_code", r.dump(), 0, false});
      usage->attached.fetch_sub(1);
    };
    return {
      [=](exec_atom, exec_cell& cell) -> caf::result<tool_response> {
        auto rp = self->make_response_promise<tool_response>();
        if (cell.code == "hold")
          held->emplace_back(rp, cell.call_id);
        else
          answer(rp, cell.call_id);
        return rp;
      },
      [=](done_atom) {
        for (auto& [rp, id] : *held)
          answer(rp, id);
        held->clear();
      },
    };
  });
  probe->handles.push_back(k);
  return k;
}

struct fixture : mibyan::test::sim_fixture {
  mibyan::test::temp_dir dir;
  std::shared_ptr<counting_launcher> launcher
    = std::make_shared<counting_launcher>();
  std::shared_ptr<kernel_probe> probe = std::make_shared<kernel_probe>();
  kernel_registry_actor registry;
  int next_call = 0;

  fixture() {
    auto s = std::make_shared<runtime_services>();
    s->cfg.home = dir.path();
    s->cfg.code_execution.sandbox = "off";
    s->cfg.code_execution.kernel_idle_timeout = 60; // reap tick: 10 s
    s->cfg.code_execution.prestart_kernels = 0;
    s->default_cwd = dir.path();
    s->pool = std::make_unique<blocking_pool>(1);
    s->clock = clock;
    s->launcher = launcher;
    auto p = probe;
    registry = spawn_kernel_registry(
      sys, s, "python3", "python3", nullptr,
      [p](caf::actor_system& sys, services_ptr svc, kernel_actor_options ko) {
        return spawn_scripted_kernel(sys, std::move(svc), std::move(ko), p);
      });
    run_all();
  }

  ~fixture() {
    caf::anon_send_exit(registry, caf::exit_reason::user_shutdown);
    run_all();
  }

  std::shared_ptr<mibyan::test::reply_box<tool_response>>
  cell(const std::string& session, const std::string& code) {
    tool_request req;
    req.session_id = session;
    req.call_id = "call-" + std::to_string(++next_call);
    req.tool = "execute_code";
    json::value args;
    args["code"] = code;
    req.args_json = args.dump();
    return ask<tool_response>(registry, invoke_atom_v, req);
  }

  json::value stats() {
    auto box = ask<std::string>(registry, stats_atom_v);
    BOOST_REQUIRE(box->value);
    auto r = json::parse(*box->value);
    BOOST_REQUIRE(r);
    return std::move(*r.v);
  }

  int64_t live_kernels() { return stats()["kernels"].as_int(); }
  int64_t reaped() { return stats()["reaped"].as_int(); }
};

std::string status_of(const tool_response& r) {
  auto v = json::parse(r.result_json);
  BOOST_REQUIRE_MESSAGE(v, r.result_json);
  auto s = v.v->find("status");
  return s != nullptr && s->is_string() ? s->as_string() : "";
}

} // namespace

BOOST_FIXTURE_TEST_CASE(idle_kernel_is_reaped_at_the_idle_timeout, fixture) {
  auto first = cell("s1", "x = 1");
  BOOST_REQUIRE(first->value);
  BOOST_CHECK_EQUAL(status_of(*first->value), "success");
  BOOST_CHECK_EQUAL(launcher->kernels.load(), 1);
  BOOST_CHECK_EQUAL(live_kernels(), 1);
  // Five reap ticks pass with the kernel idle for less than 60 s.
  advance(milliseconds(59'900));
  BOOST_CHECK_EQUAL(live_kernels(), 1);
  BOOST_CHECK_EQUAL(reaped(), 0);
  BOOST_CHECK_EQUAL(probe->alive, 1);
  // The tick at 60 s reaps it and stops its actor.
  advance(milliseconds(100));
  BOOST_CHECK_EQUAL(live_kernels(), 0);
  BOOST_CHECK_EQUAL(reaped(), 1);
  BOOST_CHECK_EQUAL(probe->alive, 0);
  // The next cell of the session starts a new kernel.
  auto again = cell("s1", "x = 2");
  BOOST_REQUIRE(again->value);
  BOOST_CHECK_EQUAL(launcher->kernels.load(), 2);
  BOOST_CHECK_EQUAL(live_kernels(), 1);
}

BOOST_FIXTURE_TEST_CASE(a_cell_restarts_the_idle_time, fixture) {
  BOOST_REQUIRE(cell("s1", "x = 1")->value);
  advance(seconds(40));
  BOOST_REQUIRE(cell("s1", "x = 2")->value);
  BOOST_CHECK_EQUAL(launcher->kernels.load(), 1); // the same kernel
  // 60 s after the second cell, not after the first.
  advance(milliseconds(59'900));
  BOOST_CHECK_EQUAL(live_kernels(), 1);
  advance(seconds(10));
  BOOST_CHECK_EQUAL(live_kernels(), 0);
  BOOST_CHECK_EQUAL(reaped(), 1);
}

BOOST_FIXTURE_TEST_CASE(a_kernel_running_a_cell_is_never_reaped, fixture) {
  auto held = cell("s1", "hold");
  BOOST_CHECK(!held->done());
  advance(seconds(300));
  BOOST_CHECK(!held->done());
  BOOST_CHECK_EQUAL(live_kernels(), 1);
  BOOST_CHECK_EQUAL(reaped(), 0);
  // The cell ends: the idle time starts now.
  BOOST_REQUIRE_EQUAL(probe->handles.size(), 1u);
  self->send(probe->handles.front(), done_atom_v);
  run_all();
  BOOST_REQUIRE(held->value);
  advance(milliseconds(59'900));
  BOOST_CHECK_EQUAL(live_kernels(), 1);
  advance(seconds(10));
  BOOST_CHECK_EQUAL(live_kernels(), 0);
}

BOOST_FIXTURE_TEST_CASE(launcher_failure_is_an_error_result, fixture) {
  launcher->refuse = true;
  auto r = cell("s1", "x = 1");
  BOOST_REQUIRE(r->value);
  BOOST_CHECK_EQUAL(status_of(*r->value), "error");
  BOOST_CHECK_MESSAGE(r->value->result_json.find("no processes in this test")
                        != std::string::npos,
                      r->value->result_json);
  BOOST_CHECK_EQUAL(live_kernels(), 0);
  // Nothing left to reap, nothing crashes when time passes.
  advance(seconds(120));
  BOOST_CHECK_EQUAL(reaped(), 0);
}
