// The session-store interface (storage/session_store.hpp), part of the
// contract the other store suites do not cover, on every backend of the
// build (tests/support/store_backends.hpp): approvals, group commit, the
// filtered and time-bounded listings, the small accessors, concurrent
// writers; and for LMDB the delete hooks other stores rely on.
#define BOOST_TEST_MODULE store_contract
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <thread>

#include "storage/lmdb/lmdb_inspect.hpp"
#include "storage/session_store.hpp"
#include "tests/support/store_backends.hpp"

using namespace mibyan;

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

chat_message msg(std::string role, std::string content) {
  chat_message m;
  m.role = std::move(role);
  m.content = std::move(content);
  return m;
}

struct fixture : test::store_fixture {
  int64_t clock = 1'700'000'000'000;

  void opened() override {
    auto o = base;
    o.now_ms = [this] { return clock; };
    open_with(o);
  }

  session_info make(const std::string& id, int64_t started = 0,
                    const std::string& model = "m") {
    new_session ns;
    ns.id = id;
    ns.model = model;
    ns.started_at_ms = started;
    auto r = store->create_session(ns);
    BOOST_REQUIRE_MESSAGE(r.ok(), r.error);
    return *r;
  }

  std::vector<std::string> ids(const std::vector<session_info>& list) {
    std::vector<std::string> out;
    for (auto& s : list)
      out.push_back(s.id);
    return out;
  }
};

struct lmdb_fixture : fixture {
  lmdb_fixture() { BOOST_REQUIRE(start("lmdb")); }
};

using strings = std::vector<std::string>;

} // namespace

BOOST_AUTO_TEST_SUITE(store_contract)

MIBYAN_STORE_TEST_CASE(names_itself_and_reports_its_figures, fixture) {
  BOOST_TEST(std::string{store->backend()} == backend);
  BOOST_TEST(store->schema_version() > 0);
  make("s");
  BOOST_REQUIRE(store->append_message("s", msg("user", "hello")));
  auto n = store->message_count();
  BOOST_REQUIRE_MESSAGE(n, n.error);
  BOOST_TEST(*n == 1u);
  auto st = store->stats();
  if (is_lmdb()) {
    BOOST_TEST(st.used_bytes > 0u);
    BOOST_TEST(st.disk_bytes > 0u);
  }
}

MIBYAN_STORE_TEST_CASE(approvals_are_kept_replaced_and_deleted, fixture) {
  // None yet, and the session need not exist to ask.
  auto none = store->get_approvals("nobody");
  BOOST_REQUIRE_MESSAGE(none, none.error);
  BOOST_TEST(none->empty());
  make("s");
  BOOST_REQUIRE(store->set_approvals("s", {"rm -rf", "git push"}));
  BOOST_TEST((*store->get_approvals("s") == strings{"rm -rf", "git push"}));
  BOOST_REQUIRE(store->set_approvals("s", {"curl"}));
  BOOST_TEST((*store->get_approvals("s") == strings{"curl"}));
  BOOST_REQUIRE(store->set_approvals("s", {}));
  BOOST_TEST(store->get_approvals("s")->empty());
  // Bad input changes nothing and says why.
  BOOST_REQUIRE(store->set_approvals("s", {"keep"}));
  auto code_of = [](const store_status& st) {
    return std::string{to_string(st.code)};
  };
  auto bad = store->set_approvals("s", strings(257, "k"));
  BOOST_TEST(code_of(bad) == "invalid_argument");
  BOOST_TEST(contains(bad.error, "more than 256 keys"), bad.error);
  bad = store->set_approvals("s", {"two\nlines"});
  BOOST_TEST(code_of(bad) == "invalid_argument");
  bad = store->set_approvals("s", {std::string(201, 'k')});
  BOOST_TEST(code_of(bad) == "invalid_argument");
  bad = store->set_approvals("s", {""});
  BOOST_TEST(code_of(bad) == "invalid_argument");
  bad = store->set_approvals("a/b", {"k"});
  BOOST_TEST(code_of(bad) == "invalid_argument");
  BOOST_TEST(std::string{to_string(store->get_approvals("a/b").code)}
             == "invalid_argument");
  BOOST_TEST((*store->get_approvals("s") == strings{"keep"}));
  // They go with the session.
  BOOST_REQUIRE(store->delete_session("s"));
  BOOST_TEST(store->get_approvals("s")->empty());
}

MIBYAN_STORE_TEST_CASE(a_group_commits_its_good_writes_and_reports_the_bad,
                       fixture) {
  make("old");
  std::vector<store_write> w(6);
  w[0].what = store_write::kind::create;
  w[0].create.id = "fresh";
  w[0].create.title = "made in a group";
  w[1].what = store_write::kind::append;
  w[1].append = {"fresh", msg("user", "first words"), "k1"};
  w[2].what = store_write::kind::append;
  w[2].append = {"ghost", msg("user", "lost"), ""};
  w[3].what = store_write::kind::append;
  w[3].append = {"old", msg("robot", "bad role"), ""};
  w[4].what = store_write::kind::usage;
  w[4].session_id = "fresh";
  w[4].usage.input_tokens = 10;
  w[4].usage.output_tokens = 3;
  w[4].api_calls = 2;
  w[5].what = store_write::kind::end;
  w[5].session_id = "old";
  w[5].reason = "done";
  auto st = store->commit_group(w);
  BOOST_REQUIRE_MESSAGE(st, st.error);
  BOOST_TEST(w[0].status.ok(), w[0].status.error);
  BOOST_TEST(w[0].created.id == "fresh");
  BOOST_TEST(w[1].status.ok(), w[1].status.error);
  BOOST_TEST(w[1].appended.id > 0u);
  BOOST_TEST(std::string{to_string(w[2].status.code)} == "not_found");
  BOOST_TEST(contains(w[2].status.error, "'ghost'"), w[2].status.error);
  BOOST_TEST(std::string{to_string(w[3].status.code)} == "invalid_argument");
  BOOST_TEST(w[4].status.ok(), w[4].status.error);
  BOOST_TEST(w[5].status.ok(), w[5].status.error);
  auto fresh = store->get_session("fresh");
  BOOST_REQUIRE(fresh);
  BOOST_TEST(fresh->title == "made in a group");
  BOOST_TEST(fresh->message_count == 1);
  BOOST_TEST(fresh->tokens.input_tokens == 10);
  BOOST_TEST(fresh->api_call_count == 2);
  BOOST_TEST(store->get_session("old")->end_reason == "done");
  BOOST_TEST(store->load_messages("old")->empty());
  // The group's keyed append is idempotent like a direct one.
  auto again = store->append_message("fresh", msg("user", "first words"),
                                     "k1");
  BOOST_REQUIRE(again);
  BOOST_TEST(again->duplicate);
  BOOST_TEST(again->id == w[1].appended.id);
  BOOST_TEST(store->verify(true).ok());
}

// The checks and read-modify-write operations every backend shares
// (storage/session_store_base.hpp): the same refusal, word for word and
// code for code, on every backend, and nothing written by a refused call.
MIBYAN_STORE_TEST_CASE(refusals_and_updates_read_the_same_on_every_backend,
                       fixture) {
  auto code_of = [](const status& st) {
    return std::string{to_string(st.code)};
  };
  make("s");
  // Sessions: a malformed id names the operation; so does an unknown one.
  auto st = store->set_title("a/b", "t");
  BOOST_TEST(code_of(st) == "invalid_argument");
  BOOST_TEST(st.error.rfind("set_title: ", 0) == 0, st.error);
  st = store->end_session("nobody", "done");
  BOOST_TEST(code_of(st) == "not_found");
  BOOST_TEST(st.error.rfind("end_session: ", 0) == 0, st.error);
  st = store->add_usage("s", token_usage{-1, 0}, 1);
  BOOST_TEST(code_of(st) == "invalid_argument");
  BOOST_TEST(st.error.rfind("add_usage: ", 0) == 0, st.error);
  new_session bad_meta;
  bad_meta.id = "m";
  bad_meta.metadata_json = "[1]";
  auto created = store->create_session(bad_meta);
  BOOST_TEST(created.error == "create_session: metadata is not a JSON object");
  BOOST_TEST(!store->get_session("m"));
  // The read-modify-writes keep what they do not change.
  BOOST_REQUIRE(store->set_title("s", "the title"));
  BOOST_REQUIRE(store->add_usage("s", token_usage{5, 2}, 3));
  BOOST_REQUIRE(store->end_session("s", "first", 100));
  BOOST_REQUIRE(store->end_session("s", "second", 200));
  auto s = store->get_session("s");
  BOOST_REQUIRE_MESSAGE(s, s.error);
  BOOST_TEST(s->title == "the title");
  BOOST_TEST(s->tokens.input_tokens == 5);
  BOOST_TEST(s->api_call_count == 3);
  BOOST_TEST(s->end_reason == "first");
  BOOST_TEST(s->ended_at_ms == 100);
  // Messages: a batch names the message it refuses, a single append is
  // append_message.
  auto one = store->append_message("s", msg("robot", "x"));
  BOOST_TEST(code_of(one.get_status()) == "invalid_argument");
  BOOST_TEST(one.error.rfind("append_message: ", 0) == 0, one.error);
  auto batch = store->append_batch({{"s", msg("user", "fine"), ""},
                                    {"s", msg("user", "k"), std::string(
                                       session_store::max_key_bytes + 1,
                                       'k')}});
  BOOST_TEST(batch.error.rfind("append_batch: message 1: idempotency key", 0)
               == 0,
             batch.error);
  BOOST_TEST(store->load_messages("s")->empty());
  // Search.
  search_request q;
  q.query = "...";
  BOOST_TEST(store->search(q).error
             == "search: the query has no searchable words (letters or "
                "digits, at most 64 bytes each)");
  q.query = "fine";
  q.roles = {"robot"};
  BOOST_TEST(store->search(q).error
             == "search: unknown role 'robot'; use system, user, assistant "
                "or tool");
  // Scheduled jobs: update_cron_job is one read-modify-write; the job
  // function's refusal keeps its code, and the id cannot change.
  cron_job_record j;
  j.id = "job1";
  j.name = "a job";
  BOOST_REQUIRE(store->put_cron_job(j));
  auto up = store->update_cron_job("job1", [](cron_job_record& r) {
    r.id = "job2";
    return status{};
  });
  BOOST_TEST(code_of(up.get_status()) == "invalid_argument");
  BOOST_TEST(up.error == "update_cron_job: the id cannot change");
  up = store->update_cron_job("job1", [](cron_job_record& r) {
    r.name = "changed";
    return status::failure(status_code::permission_denied, "not now");
  });
  BOOST_TEST(code_of(up.get_status()) == "permission_denied");
  BOOST_TEST(up.error == "update_cron_job: not now");
  BOOST_TEST(store->get_cron_job("job1")->name == "a job");
  up = store->update_cron_job("job1", [](cron_job_record& r) {
    r.name = "renamed";
    return status{};
  });
  BOOST_REQUIRE_MESSAGE(up, up.error);
  BOOST_TEST(up->name == "renamed");
  BOOST_TEST(store->get_cron_job("job1")->name == "renamed");
  up = store->update_cron_job("nojob", [](cron_job_record&) {
    return status{};
  });
  BOOST_TEST(code_of(up.get_status()) == "not_found");
  bool more = true;
  auto runs = store->list_cron_runs("job1", 0, 0, &more);
  BOOST_REQUIRE(runs);
  BOOST_TEST(runs->empty());
  BOOST_TEST(!more);
  cron_changes bad_changes;
  bad_changes.deleted_jobs = {"bad id!"};
  st = store->apply_cron_changes(bad_changes, 0);
  BOOST_TEST(code_of(st) == "invalid_argument");
  BOOST_TEST(st.error.rfind("apply_cron_changes: ", 0) == 0, st.error);
  BOOST_TEST(store->verify(true).ok());
}

MIBYAN_STORE_TEST_CASE(filtered_listings_page_newest_first, fixture) {
  for (int i = 1; i <= 9; ++i)
    make("s" + std::to_string(i), i * 1000, i % 3 == 0 ? "big" : "small");
  bool more = false;
  auto keep_big = [](const session_info& s) { return s.model == "big"; };
  auto page = store->list_sessions_where(2, 0, keep_big, &more);
  BOOST_REQUIRE_MESSAGE(page, page.error);
  BOOST_TEST((ids(*page) == strings{"s9", "s6"}));
  BOOST_TEST(more);
  page = store->list_sessions_where(2, 2, keep_big, &more);
  BOOST_REQUIRE(page);
  BOOST_TEST((ids(*page) == strings{"s3"}));
  BOOST_TEST(!more);
  // No filter: every session; `more` may be left out.
  page = store->list_sessions_where(3, 7, {}, nullptr);
  BOOST_REQUIRE(page);
  BOOST_TEST((ids(*page) == strings{"s2", "s1"}));
  // Since a time: inclusive, newest first, bounded.
  auto since = store->list_sessions_since(7000, 10);
  BOOST_REQUIRE_MESSAGE(since, since.error);
  BOOST_TEST((ids(*since) == strings{"s9", "s8", "s7"}));
  since = store->list_sessions_since(0, 2);
  BOOST_REQUIRE(since);
  BOOST_TEST((ids(*since) == strings{"s9", "s8"}));
  BOOST_TEST(store->list_sessions_since(10'000, 10)->empty());
}

// Writers on several threads at once (production has one writer actor,
// but the interface promises any thread): nothing is lost or duplicated.
MIBYAN_STORE_TEST_CASE(concurrent_writers_lose_nothing, fixture) {
  constexpr int threads = 4;
  constexpr int per_thread = 25;
  for (int t = 0; t < threads; ++t)
    make("w" + std::to_string(t));
  std::atomic<int> failures{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      auto sid = "w" + std::to_string(t);
      for (int i = 0; i < per_thread; ++i) {
        auto r = store->append_message(
          sid, msg("user", "note " + std::to_string(i)),
          "key" + std::to_string(i));
        if (!r || r->duplicate)
          ++failures;
      }
    });
  for (auto& th : pool)
    th.join();
  BOOST_TEST(failures == 0);
  for (int t = 0; t < threads; ++t) {
    auto m = store->load_messages("w" + std::to_string(t));
    BOOST_REQUIRE(m);
    BOOST_REQUIRE(m->size() == size_t{per_thread});
    for (int i = 0; i < per_thread; ++i)
      BOOST_TEST((*m)[static_cast<size_t>(i)].message.content
                 == "note " + std::to_string(i));
  }
  BOOST_TEST(*store->message_count() == size_t{threads * per_thread});
}

// LMDB only: other stores keep per-session rows in the LMDB environment
// and delete them in delete_session's transaction through a hook; a hook
// that fails aborts the whole delete.
BOOST_FIXTURE_TEST_CASE(delete_hooks_run_in_the_delete_transaction,
                        lmdb_fixture) {
  using lmdb_inspect::change;
  make("a");
  make("b");
  BOOST_REQUIRE(lmdb_inspect::write(
    *store, {{change::kind::put, "extra", "a", "row of a"},
             {change::kind::put, "extra", std::string{"a\0001", 3}, "a1"},
             {change::kind::put, "extra", std::string{"ab\0001", 4}, "ab1"},
             {change::kind::put, "extra", "b", "row of b"}}));
  BOOST_REQUIRE(lmdb_inspect::add_delete_hook(*store, "extra"));
  BOOST_REQUIRE(store->delete_session("a"));
  auto rows = lmdb_inspect::scan(*store, "extra");
  BOOST_REQUIRE_MESSAGE(rows, rows.error);
  strings keys;
  for (auto& kv : *rows)
    keys.push_back(kv.first);
  BOOST_TEST((keys == strings{std::string{"ab\0001", 4}, "b"}));
  // A failing hook: nothing of the session is deleted.
  BOOST_REQUIRE(store->append_message("b", msg("user", "still here")));
  BOOST_REQUIRE(lmdb_inspect::add_delete_hook(*store, "extra",
                                              "the extra store is broken"));
  auto st = store->delete_session("b");
  BOOST_TEST(!st);
  BOOST_TEST(contains(st.error, "the extra store is broken"), st.error);
  BOOST_TEST(store->get_session("b").ok());
  auto left = store->load_messages("b");
  BOOST_REQUIRE_MESSAGE(left, left.error);
  BOOST_TEST(left->size() == 1u);
  BOOST_TEST(lmdb_inspect::get(*store, "extra", "b")->has_value());
  BOOST_TEST(store->verify(true).ok());
}

BOOST_AUTO_TEST_SUITE_END()
