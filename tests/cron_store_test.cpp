// Scheduled jobs in the session store, on every backend of the build
// (tests/support/store_backends.hpp). Jobs and runs survive a reopen, the
// history pages newest first and is pruned per job, a damaged record is a
// clear error that hides nothing else, and the engine's changes persist
// and load back.
#define BOOST_TEST_MODULE cron_store
#include <boost/test/unit_test.hpp>

#include "cron/engine.hpp"
#include "cron/job.hpp"
#include "storage/lmdb/lmdb_inspect.hpp"
#include "storage/session_store.hpp"
#include "tests/support/store_backends.hpp"

using namespace mibyan;

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

constexpr int64_t t0 = 1'780'272'000'000; // 2026-06-01 00:00 UTC
constexpr int64_t hour = 3'600'000;

struct fixture : test::store_fixture {
  void opened() override { reopen(); }

  void reopen(bool read_only = false) {
    store.reset();
    auto o = base;
    o.read_only = read_only;
    open_with(o);
  }

  cron_job job(const std::string& id, const std::string& schedule) {
    cron_job j;
    j.id = id;
    j.name = "name of " + id;
    j.schedule = schedule;
    j.timezone = "Europe/Berlin";
    j.prompt = "check the repository\nand report";
    j.skills = {"git"};
    j.cwd = "/srv/repo";
    j.toolsets = {"terminal", "file"};
    j.model = "m";
    j.provider = "p";
    j.deliver = {"session", "file:/tmp/out.md", "webhook:https://x.test/h"};
    j.created_by = "agent";
    j.created_by_session = "sess_1";
    j.created_ms = t0;
    j.updated_ms = t0 + 1;
    j.next_run_ms = t0 + hour;
    j.last_status = cron_run_status::ok;
    j.consecutive_failures = 2;
    j.pause_reason = "";
    j.run_count = 7;
    return j;
  }

  cron_run run(const std::string& id, const std::string& job_id, int n) {
    cron_run r;
    r.id = id;
    r.job_id = job_id;
    r.session_id = "sess_" + std::to_string(n);
    r.scheduled_for_ms = t0 + n * hour;
    r.started_ms = t0 + n * hour + 5;
    r.ended_ms = t0 + n * hour + 500;
    r.status = cron_run_status::ok;
    r.trigger = cron_trigger::schedule;
    r.result = "answer " + std::to_string(n);
    r.delivery_json = "[{\"target\":\"session\",\"ok\":true}]";
    return r;
  }
};

void check_same(const cron_job& a, const cron_job& b) {
  BOOST_CHECK_EQUAL(cron_job_to_json(a).dump(), cron_job_to_json(b).dump());
}

// The same on an LMDB store, for the cases of LMDB-only behaviour.
struct lmdb_fixture : fixture {
  lmdb_fixture() { BOOST_REQUIRE(start("lmdb")); }
};

} // namespace

MIBYAN_STORE_TEST_CASE(jobs_and_runs_survive_a_reopen, fixture) {
  auto a = job("job_a", "0 9 * * 1-5");
  auto b = job("job_b", "every 2h");
  b.paused = true;
  b.pause_reason = "paused by a user";
  BOOST_REQUIRE(store->put_cron_job(a).ok());
  BOOST_REQUIRE(store->put_cron_job(b).ok());
  BOOST_REQUIRE(store->put_cron_run(run("run_1", "job_a", 1), 10).ok());
  reopen();
  auto ga = store->get_cron_job("job_a");
  BOOST_REQUIRE_MESSAGE(ga.ok(), ga.error);
  check_same(*ga, a);
  BOOST_CHECK_EQUAL(ga->deliver.size(), 3u);
  auto all = store->list_cron_jobs();
  BOOST_REQUIRE(all.ok());
  BOOST_CHECK_EQUAL(all->jobs.size(), 2u);
  BOOST_CHECK(all->damaged.empty());
  auto sched = store->list_cron_jobs(true);
  BOOST_REQUIRE(sched.ok());
  BOOST_REQUIRE_EQUAL(sched->jobs.size(), 1u);
  BOOST_CHECK_EQUAL(sched->jobs[0].id, "job_a");
  auto r = store->get_cron_run("run_1");
  BOOST_REQUIRE_MESSAGE(r.ok(), r.error);
  BOOST_CHECK_EQUAL(r->result, "answer 1");
  BOOST_CHECK_EQUAL(r->delivery_json, "[{\"target\":\"session\",\"ok\":true}]");
  // Read-only opens see them too.
  reopen(true);
  BOOST_CHECK(store->get_cron_job("job_b").ok());
  BOOST_CHECK(store->put_cron_job(a).code != status_code::ok);
}

MIBYAN_STORE_TEST_CASE(errors_name_the_object, fixture) {
  auto g = store->get_cron_job("job_missing");
  BOOST_CHECK(g.code == status_code::not_found);
  BOOST_CHECK(contains(g.error, "no job 'job_missing'"));
  BOOST_CHECK(store->get_cron_job("bad id!").code
              == status_code::invalid_argument);
  BOOST_CHECK(store->get_cron_job(std::string(65, 'a')).code
              == status_code::invalid_argument);
  BOOST_CHECK(store->delete_cron_job("job_missing").code
              == status_code::not_found);
  // A run needs its job.
  auto pr = store->put_cron_run(run("run_1", "job_missing", 1), 10);
  BOOST_CHECK(pr.code == status_code::not_found);
  BOOST_CHECK(store->get_cron_run("run_1").code == status_code::not_found);
  auto none = store->list_cron_runs("job_missing", 10, 0);
  BOOST_REQUIRE(none.ok());
  BOOST_CHECK(none->empty());
}

MIBYAN_STORE_TEST_CASE(history_pages_newest_first_and_is_pruned, fixture) {
  BOOST_REQUIRE(store->put_cron_job(job("job_a", "every 1h")).ok());
  BOOST_REQUIRE(store->put_cron_job(job("job_b", "every 1h")).ok());
  for (int i = 1; i <= 25; ++i) {
    BOOST_REQUIRE(store->put_cron_run(run("run_a" + std::to_string(i),
                                          "job_a", i), 20).ok());
    if (i <= 3)
      BOOST_REQUIRE(store->put_cron_run(run("run_b" + std::to_string(i),
                                            "job_b", i), 20).ok());
  }
  bool more = false;
  auto p1 = store->list_cron_runs("job_a", 8, 0, &more);
  BOOST_REQUIRE(p1.ok());
  BOOST_REQUIRE_EQUAL(p1->size(), 8u);
  BOOST_CHECK(more);
  BOOST_CHECK_EQUAL(p1->front().id, "run_a25");
  BOOST_CHECK_EQUAL(p1->back().id, "run_a18");
  auto p3 = store->list_cron_runs("job_a", 8, 16, &more);
  BOOST_REQUIRE(p3.ok());
  // 20 kept: run_a6 .. run_a25; the third page has the last 4.
  BOOST_REQUIRE_EQUAL(p3->size(), 4u);
  BOOST_CHECK(!more);
  BOOST_CHECK_EQUAL(p3->back().id, "run_a6");
  BOOST_CHECK(store->get_cron_run("run_a5").code == status_code::not_found);
  BOOST_CHECK(store->get_cron_run("run_a6").ok());
  // The other job's history is its own.
  auto b = store->list_cron_runs("job_b", 100, 0, &more);
  BOOST_REQUIRE(b.ok());
  BOOST_CHECK_EQUAL(b->size(), 3u);
  BOOST_CHECK_EQUAL(b->front().id, "run_b3");
  // Replacing a run keeps its place.
  auto r = run("run_a20", "job_a", 20);
  r.status = cron_run_status::error;
  BOOST_REQUIRE(store->put_cron_run(r, 20).ok());
  auto again = store->list_cron_runs("job_a", 100, 0);
  BOOST_REQUIRE(again.ok());
  BOOST_CHECK_EQUAL(again->size(), 20u);
  BOOST_CHECK_EQUAL((*again)[5].id, "run_a20");
  BOOST_CHECK_EQUAL((*again)[5].status, cron_run_status::error);
  // A run id cannot move to another job.
  auto moved = run("run_a20", "job_b", 20);
  BOOST_CHECK(!store->put_cron_run(moved, 20).ok());
  // Deleting the job deletes its history, not the other's.
  BOOST_REQUIRE(store->delete_cron_job("job_a").ok());
  auto gone = store->list_cron_runs("job_a", 100, 0);
  BOOST_REQUIRE(gone.ok());
  BOOST_CHECK(gone->empty());
  BOOST_CHECK(store->get_cron_run("run_a25").code == status_code::not_found);
  BOOST_CHECK_EQUAL(store->list_cron_runs("job_b", 100, 0)->size(), 3u);
}

// LMDB only: the records are damaged through LMDB (lmdb_inspect).
BOOST_FIXTURE_TEST_CASE(a_damaged_record_is_a_clear_error_and_hides_nothing,
                        lmdb_fixture) {
  BOOST_REQUIRE(store->put_cron_job(job("job_a", "every 1h")).ok());
  BOOST_REQUIRE(store->put_cron_job(job("job_b", "every 1h")).ok());
  BOOST_REQUIRE(store->put_cron_job(job("job_c", "every 1h")).ok());
  BOOST_REQUIRE(store->put_cron_run(run("run_1", "job_a", 1), 10).ok());
  BOOST_REQUIRE(store->put_cron_run(run("run_2", "job_a", 2), 10).ok());
  // Overwrite job_b with garbage and run_2 with a truncated record.
  auto run_key = lmdb_inspect::get(*store, "cron_run_ids", "run_2");
  BOOST_REQUIRE_MESSAGE(run_key && *run_key, run_key.error);
  auto run_rec = lmdb_inspect::get(*store, "cron_runs", **run_key);
  BOOST_REQUIRE_MESSAGE(run_rec && *run_rec, run_rec.error);
  std::string cut = (*run_rec)->substr(0, (*run_rec)->size() / 2);
  using lmdb_inspect::change;
  auto st = lmdb_inspect::write(
    *store, {{change::kind::put, "cron_jobs", "job_b", "\x07garbage"},
             {change::kind::put, "cron_runs", **run_key, cut}});
  BOOST_REQUIRE_MESSAGE(st.ok(), st.error);
  reopen();
  auto b = store->get_cron_job("job_b");
  BOOST_CHECK(b.code == status_code::data_corrupt);
  BOOST_CHECK(contains(b.error, "job 'job_b' is damaged"));
  auto all = store->list_cron_jobs();
  BOOST_REQUIRE_MESSAGE(all.ok(), all.error);
  BOOST_CHECK_EQUAL(all->jobs.size(), 2u);
  BOOST_REQUIRE_EQUAL(all->damaged.size(), 1u);
  BOOST_CHECK(contains(all->damaged[0], "job_b"));
  auto r2 = store->get_cron_run("run_2");
  BOOST_CHECK(r2.code == status_code::data_corrupt);
  BOOST_CHECK(contains(r2.error, "run 'run_2' is damaged"));
  auto runs = store->list_cron_runs("job_a", 10, 0);
  BOOST_CHECK(runs.code == status_code::data_corrupt);
  BOOST_CHECK(contains(runs.error, "of job 'job_a' is damaged"));
  // The rest is intact and the damaged job can be deleted.
  BOOST_CHECK(store->get_cron_run("run_1").ok());
  BOOST_CHECK(store->get_cron_job("job_a").ok());
  BOOST_REQUIRE(store->delete_cron_job("job_b").ok());
  auto after = store->list_cron_jobs();
  BOOST_CHECK(after->damaged.empty());
  BOOST_CHECK_EQUAL(after->jobs.size(), 2u);
  // And the sessions database is untouched by any of it.
  BOOST_CHECK(store->verify(true).ok());
}

MIBYAN_STORE_TEST_CASE(update_is_atomic_and_refusals_change_nothing, fixture) {
  BOOST_REQUIRE(store->put_cron_job(job("job_a", "every 1h")).ok());
  auto u = store->update_cron_job("job_a", [](cron_job& j) {
    j.paused = true;
    j.pause_reason = "by test";
    return status{};
  });
  BOOST_REQUIRE_MESSAGE(u.ok(), u.error);
  BOOST_CHECK(u->paused);
  auto refused = store->update_cron_job("job_a", [](cron_job& j) {
    j.name = "changed";
    return status::failure(status_code::unavailable, "not now");
  });
  BOOST_CHECK(refused.code == status_code::unavailable);
  BOOST_CHECK(contains(refused.error, "not now"));
  auto id_change = store->update_cron_job("job_a", [](cron_job& j) {
    j.id = "job_z";
    return status{};
  });
  BOOST_CHECK(id_change.code == status_code::invalid_argument);
  auto g = store->get_cron_job("job_a");
  BOOST_CHECK_EQUAL(g->name, "name of job_a");
  BOOST_CHECK(g->paused);
  BOOST_CHECK(store->update_cron_job("job_none", [](cron_job&) {
                     return status{};
                   }).code == status_code::not_found);
}

MIBYAN_STORE_TEST_CASE(engine_changes_persist_and_load_back, fixture) {
  int64_t now = t0;
  cron_engine_options o;
  o.clock = [&] { return cron_time_from_ms(now); };
  o.default_zone = "UTC";
  auto engine = std::make_unique<cron_engine>(o);
  auto persist = [&](const cron_changes& ch) {
    auto st = store->apply_cron_changes(ch, 5);
    BOOST_REQUIRE_MESSAGE(st.ok(), st.error);
  };
  cron_job j;
  j.name = "hourly";
  j.schedule = "every 1h";
  j.prompt = "hello";
  auto added = engine->add(j);
  BOOST_REQUIRE_MESSAGE(added.ok(), added.error);
  auto id = added->jobs[0].id;
  persist(*added);
  // Eight runs: history keeps five.
  for (int i = 1; i <= 8; ++i) {
    now = t0 + i * hour;
    std::vector<cron_start> starts;
    persist(engine->due(starts));
    BOOST_REQUIRE_EQUAL(starts.size(), 1u);
    if (i == 8)
      break; // the node stops during the eighth run
    cron_outcome out;
    out.status = cron_run_status::ok;
    out.result = "run " + std::to_string(i);
    persist(*engine->finished(starts[0].run.id, out));
  }
  auto runs = store->list_cron_runs(id, 100, 0);
  BOOST_REQUIRE(runs.ok());
  BOOST_REQUIRE_EQUAL(runs->size(), 5u);
  BOOST_CHECK_EQUAL(runs->front().status, cron_run_status::running);
  BOOST_CHECK_EQUAL((*runs)[1].result, "run 7");
  // Restart 30 minutes later: the stored state is what a new engine loads.
  reopen();
  now = t0 + 8 * hour + hour / 2;
  engine = std::make_unique<cron_engine>(o);
  auto loaded = store->list_cron_jobs(true);
  BOOST_REQUIRE(loaded.ok());
  BOOST_REQUIRE_EQUAL(loaded->jobs.size(), 1u);
  persist(engine->load(loaded->jobs, [&](const std::string& run_id) {
    auto r = store->get_cron_run(run_id);
    return r.ok() ? std::optional<cron_run>{*r} : std::nullopt;
  }));
  auto after = store->list_cron_runs(id, 100, 0);
  BOOST_REQUIRE(after.ok());
  BOOST_CHECK_EQUAL(after->front().status, cron_run_status::interrupted);
  BOOST_CHECK_EQUAL(after->front().scheduled_for_ms, t0 + 8 * hour);
  BOOST_CHECK_EQUAL(after->size(), 5u);
  // One catch-up run for the interrupted one, then the 9h slot.
  std::vector<cron_start> starts;
  persist(engine->due(starts));
  BOOST_REQUIRE_EQUAL(starts.size(), 1u);
  BOOST_CHECK_EQUAL(starts[0].run.trigger, cron_trigger::catch_up);
  BOOST_CHECK_EQUAL(cron_ms(*engine->next_wake()), t0 + 9 * hour);
  auto stored = store->get_cron_job(id);
  BOOST_REQUIRE(stored.ok());
  BOOST_CHECK_EQUAL(stored->running_run_id, starts[0].run.id);
  BOOST_CHECK_EQUAL(stored->run_count, 9);
  // Removing deletes job and history in the store.
  auto rm = engine->remove(id);
  persist(*rm);
  BOOST_CHECK(store->get_cron_job(id).code == status_code::not_found);
  BOOST_CHECK(store->list_cron_runs(id, 100, 0)->empty());
}
