// One scheduler per store in a cluster (docs/cron.md, "In a cluster"): two
// real `mibyan node` gateways on loopback share one $MIBYAN_HOME; jobs
// created from a third process (through the store's request files) fire
// exactly once each, and when the gateway holding the store's lease is
// killed, the other takes over and fires the next jobs, still once each.
// Real clock: one-shot jobs due a few seconds out; waits are bounded polls.
#define BOOST_TEST_MODULE cron_cluster_test
#include <boost/test/unit_test.hpp>

#include "cron/cron_service.hpp"
#include "runtime/cron_lease.hpp"
#include "runtime/cron_scheduler.hpp"
#include "storage/session_store.hpp"
#include "tests/support/gateway_fixture.hpp"

using namespace mibyan;
using namespace mibyan::test;

namespace {

// The gateways run with role "all": each is a worker of its own too.
struct shared_home_cluster : gateways {
  std::shared_ptr<session_store> store;
  std::shared_ptr<cron_service> jobs;

  std::unique_ptr<node_process> start_gateway(const std::string& join) {
    return gateways::start_gateway(join, "all");
  }

  void open_jobs() {
    session_store_options so;
    so.dir = session_store::default_dir(home);
    auto st = session_store::open(so);
    BOOST_REQUIRE_MESSAGE(st, st.error);
    store = std::shared_ptr<session_store>(std::move(*st));
    options o;
    o.home = home;
    jobs = open_cron_service(store, so.dir, o);
  }

  std::string add_one_shot(const std::string& name, int seconds) {
    auto v = json::parse(R"({"schedule":"in )" + std::to_string(seconds)
                         + R"(s","name":")" + name
                         + R"(","prompt":"report"})");
    auto def = cron_job_from_json(*v.v, "UTC");
    BOOST_REQUIRE_MESSAGE(def, def.error);
    auto j = jobs->add(*def);
    BOOST_REQUIRE_MESSAGE(j, j.error);
    return j->id;
  }

  size_t ended_runs(const std::string& id, size_t* all = nullptr) {
    auto h = jobs->history(id, 20, 0, nullptr);
    if (!h)
      return 0;
    size_t n = 0;
    for (auto& r : *h)
      n += r.ended_ms != 0 ? 1 : 0;
    if (all)
      *all = h->size();
    return n;
  }

  size_t chat_requests() {
    size_t n = 0;
    for (auto& b : request_bodies(provider))
      n += b.find("messages") != nullptr ? 1 : 0;
    return n;
  }

  std::string holder() {
    return store ? cron_lease::holder_of(*store) : std::string{};
  }

  void wait_fired(const std::vector<std::string>& ids) {
    for (int i = 0; i < 600; ++i) {
      bool all = true;
      for (auto& id : ids)
        all = all && ended_runs(id) >= 1;
      if (all)
        return;
      std::this_thread::sleep_for(milliseconds{100});
    }
    BOOST_FAIL("the jobs did not all run");
  }

  // Checks that each job of `ids` has exactly one run, and that it ended.
  void check_ran_once(const std::vector<std::string>& ids) {
    for (auto& id : ids) {
      size_t all = 0;
      BOOST_CHECK_EQUAL(ended_runs(id, &all), 1u);
      BOOST_CHECK_EQUAL(all, 1u);
    }
  }
};

} // namespace

BOOST_FIXTURE_TEST_CASE(two_gateways_on_one_store_fire_each_job_once,
                        shared_home_cluster) {
  provider.script_chat(completion("done"), 20);
  // Jobs stored before either gateway starts: both load them, and only the
  // lease keeps the second from firing them too.
  open_jobs();
  std::vector<std::string> ids{add_one_shot("one", 4), add_one_shot("two", 5),
                               add_one_shot("three", 5)};
  auto a = start_gateway("");
  auto b = start_gateway(a->address);
  auto c = connect(a->address);
  wait_members(*c, 2);
  // One of the two holds the store's lease.
  for (int i = 0; i < 100 && holder().empty(); ++i)
    std::this_thread::sleep_for(milliseconds{100});
  auto first = holder();
  BOOST_REQUIRE_MESSAGE(contains(first, "node " + a->id)
                          || contains(first, "node " + b->id),
                        "holder: " << first);
  // And one added while they run (handed to the holder).
  ids.push_back(add_one_shot("four", 2));
  wait_fired(ids);
  // Give a second scheduler every chance to fire them too.
  std::this_thread::sleep_for(seconds{3});
  check_ran_once(ids);
  BOOST_CHECK_EQUAL(chat_requests(), 4u);
  // The holder dies: the other gateway takes over and fires what comes.
  auto& dead = contains(first, "node " + a->id) ? a : b;
  auto& alive = contains(first, "node " + a->id) ? b : a;
  dead->stop(SIGKILL);
  std::vector<std::string> more{add_one_shot("five", 2),
                                add_one_shot("six", 3)};
  wait_fired(more);
  std::this_thread::sleep_for(seconds{2});
  check_ran_once(more);
  BOOST_CHECK_EQUAL(chat_requests(), 6u);
  BOOST_CHECK_MESSAGE(contains(holder(), "node " + alive->id),
                      "holder: " << holder());
  BOOST_CHECK_EQUAL(alive->stop(), 0);
}

BOOST_FIXTURE_TEST_CASE(a_node_killed_in_the_middle_of_a_run_catches_up,
                        shared_home_cluster) {
  // The first answer never comes in time: the node is killed meanwhile.
  provider.script(R"({"path":"/v1/chat/completions","status":200,"body":)"
                  + json::value{completion("too late")}.dump()
                  + R"(,"delay_ms":60000})");
  provider.script_chat(completion("caught up"), 5);
  auto a = start_gateway("");
  open_jobs();
  auto id = add_one_shot("slow", 1);
  std::string running;
  for (int i = 0; i < 300 && running.empty(); ++i) {
    auto h = jobs->history(id, 5, 0, nullptr);
    if (h && !h->empty() && h->front().status == "running"
        && !request_bodies(provider).empty())
      running = h->front().id;
    else
      std::this_thread::sleep_for(milliseconds{100});
  }
  BOOST_REQUIRE_MESSAGE(!running.empty(), "the run did not start");
  a->stop(SIGKILL);
  // Nothing stored is lost: the run is still recorded, as running.
  auto h = jobs->history(id, 5, 0, nullptr);
  BOOST_REQUIRE(h && h->size() == 1);
  BOOST_CHECK_EQUAL(h->front().status, "running");
  auto b = start_gateway("");
  wait_fired({id});
  for (int i = 0; i < 300 && ended_runs(id) < 2; ++i)
    std::this_thread::sleep_for(milliseconds{100});
  auto runs = jobs->history(id, 5, 0, nullptr);
  BOOST_REQUIRE(runs && runs->size() == 2);
  BOOST_CHECK_EQUAL(runs->back().id, running);
  BOOST_CHECK_EQUAL(runs->back().status, "interrupted");
  BOOST_CHECK_EQUAL(runs->front().trigger, "catch_up");
  BOOST_CHECK_EQUAL(runs->front().status, "ok");
  BOOST_CHECK_EQUAL(runs->front().result, "caught up");
  BOOST_CHECK_EQUAL(b->stop(), 0);
}
