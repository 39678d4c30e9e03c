// The PostgreSQL session store (storage/postgres/) on a throw-away server
// (tests/support/pg_server.hpp): what is particular to PostgreSQL -
// connection errors, a lost connection and reconnecting, migrations and a
// newer schema, passwords from the environment, two stores (gateways) over
// one database, tsvector search matching the LMDB index's words. The
// operations' common contract runs on both backends in the store suites.
#define BOOST_TEST_MODULE pg_store
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <ostream>
#include <set>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "storage/postgres/pg_connection.hpp"
#include "storage/postgres/pg_session_store.hpp"
#include "storage/user_state_store.hpp"
#include "tests/support/pg_server.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mibyan;

namespace mibyan {
inline std::ostream& operator<<(std::ostream& o, status_code c) {
  return o << to_string(c);
}
} // namespace mibyan

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

chat_message msg(std::string role, std::string content) {
  chat_message m;
  m.role = std::move(role);
  m.content = std::move(content);
  if (m.role == "tool")
    m.tool_call_id = "call_1";
  return m;
}

struct fixture {
  test::pg_server& pg = test::shared_pg_server();
  std::string db = pg.fresh_database();

  pg_store_options options() const {
    pg_store_options o;
    o.url = pg.url(db);
    o.pool_size = 3;
    return o;
  }
  std::unique_ptr<pg_session_store> open() const {
    auto r = pg_session_store::open(options());
    BOOST_REQUIRE_MESSAGE(r.ok(), r.error);
    return std::move(*r);
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(pg_store, fixture)

BOOST_AUTO_TEST_CASE(creates_appends_and_loads) {
  auto store = open();
  BOOST_TEST(store->schema_version() == 2);
  new_session ns;
  ns.title = "first";
  ns.metadata_json = R"({"a":1})";
  auto s = store->create_session(ns);
  BOOST_REQUIRE_MESSAGE(s.ok(), s.error);
  BOOST_TEST(s->id.size() > 16);
  auto a = store->append_message(s->id, msg("user", "hello world"), "k1");
  BOOST_REQUIRE_MESSAGE(a.ok(), a.error);
  auto dup = store->append_message(s->id, msg("user", "other"), "k1");
  BOOST_REQUIRE(dup.ok());
  BOOST_TEST(dup->duplicate);
  BOOST_TEST(dup->id == a->id);
  auto skipped = store->append_message(s->id, msg("user", "x"), "_scaffold");
  BOOST_TEST(skipped->skipped);
  chat_message call = msg("assistant", "");
  call.tool_calls.push_back(tool_call{"c1", "terminal", R"({"cmd":"ls"})"});
  BOOST_REQUIRE(store->append_message(s->id, call).ok());
  std::string nul_text = std::string{"zero\0byte", 9};
  BOOST_REQUIRE(store->append_message(s->id, msg("tool", nul_text)).ok());
  auto loaded = store->load_messages(s->id);
  BOOST_REQUIRE_MESSAGE(loaded.ok(), loaded.error);
  BOOST_REQUIRE(loaded->size() == 3u);
  BOOST_TEST((*loaded)[0].key == "k1");
  BOOST_TEST((*loaded)[1].message.tool_calls.at(0).name == "terminal");
  BOOST_TEST((*loaded)[2].message.content == nul_text);
  auto info = store->get_session(s->id);
  BOOST_TEST(info->message_count == 3);
  BOOST_TEST(info->tool_call_count == 1);
  BOOST_TEST(info->metadata_json == R"({"a":1})");
  BOOST_TEST(store->verify(true).ok(), store->verify(true).error);
  BOOST_TEST(*store->last_message_id(s->id) == (*loaded)[2].id);
}

BOOST_AUTO_TEST_CASE(batch_is_all_or_nothing) {
  auto store = open();
  new_session ns;
  ns.id = "sess-1";
  BOOST_REQUIRE(store->create_session(ns).ok());
  std::vector<pending_append> batch = {
    {"sess-1", msg("user", "one"), "a"},
    {"sess-1", msg("user", "two"), "a"},  // duplicate of the first
    {"missing", msg("user", "three"), ""}};
  auto r = store->append_batch(batch);
  BOOST_TEST(!r.ok());
  BOOST_TEST(r.code == status_code::not_found);
  BOOST_TEST(contains(r.error, "missing"), r.error);
  BOOST_TEST(store->load_messages("sess-1")->empty());
  batch.pop_back();
  r = store->append_batch(batch);
  BOOST_REQUIRE_MESSAGE(r.ok(), r.error);
  BOOST_TEST((*r)[1].duplicate);
  BOOST_TEST((*r)[1].id == (*r)[0].id);
  BOOST_TEST(store->get_session("sess-1")->message_count == 1);
}

BOOST_AUTO_TEST_CASE(search_matches_words_and_phrases) {
  auto store = open();
  new_session ns;
  ns.id = "s";
  BOOST_REQUIRE(store->create_session(ns).ok());
  BOOST_REQUIRE(store->append_message("s", msg("user", "the session_store opens LMDB")).ok());
  BOOST_REQUIRE(store->append_message("s", msg("assistant", "store the session later")).ok());
  BOOST_REQUIRE(store->append_message("s", msg("tool", "Überraschung im Café")).ok());
  search_request q;
  q.query = "session_store";  // a phrase: session then store
  auto r = store->search(q);
  BOOST_REQUIRE_MESSAGE(r.ok(), r.error);
  BOOST_TEST(r->total == 1u);
  BOOST_TEST(r->hits.at(0).role == "user");
  BOOST_TEST(contains(r->hits[0].snippet, ">>>session<<<"), r->hits[0].snippet);
  q.query = "session store";
  r = store->search(q);
  BOOST_TEST(r->total == 2u);
  q.roles = {"assistant"};
  r = store->search(q);
  BOOST_TEST(r->total == 1u);
  q.roles = {"bogus"};
  BOOST_TEST(store->search(q).code == status_code::invalid_argument);
  q.roles = {};
  q.query = "café";
  r = store->search(q);
  BOOST_TEST(r->total == 1u);
  q.query = "...";
  BOOST_TEST(store->search(q).code == status_code::invalid_argument);
  q.query = "store";
  q.session_id = "nope";
  BOOST_TEST(store->search(q).code == status_code::not_found);
}

BOOST_AUTO_TEST_CASE(search_pages_and_totals) {
  auto store = open();
  new_session ns;
  ns.id = "p";
  BOOST_REQUIRE(store->create_session(ns).ok());
  std::vector<pending_append> batch;
  for (int i = 0; i < 30; ++i)
    batch.push_back({"p", msg("user", "needle number " + std::to_string(i)
                                        + std::string(i % 5, 'x')),
                     ""});
  BOOST_REQUIRE(store->append_batch(batch).ok());
  search_request q;
  q.query = "needle";
  q.limit = 10;
  q.offset = 25;
  auto r = store->search(q);
  BOOST_REQUIRE_MESSAGE(r.ok(), r.error);
  BOOST_TEST(r->total == 30u);
  BOOST_TEST(r->hits.size() == 5u);
  q.offset = 40;
  r = store->search(q);
  BOOST_TEST(r->total == 30u);
  BOOST_TEST(r->hits.empty());
  // Every hit exactly once over the pages, best first within a page.
  std::set<uint64_t> seen;
  for (size_t off = 0; off < 30; off += 7) {
    q.offset = off;
    q.limit = 7;
    r = store->search(q);
    BOOST_REQUIRE(r.ok());
    for (size_t i = 0; i < r->hits.size(); ++i) {
      seen.insert(r->hits[i].message_id);
      if (i > 0)
        BOOST_TEST(r->hits[i - 1].score >= r->hits[i].score);
    }
  }
  BOOST_TEST(seen.size() == 30u);
  q.limit = 0;
  BOOST_TEST(store->search(q).code == status_code::invalid_argument);
  q.limit = 1001;
  BOOST_TEST(store->search(q).code == status_code::invalid_argument);
}

BOOST_AUTO_TEST_CASE(a_lost_connection_is_unavailable_then_reconnects) {
  auto store = open();
  new_session ns;
  ns.id = "s";
  BOOST_REQUIRE(store->create_session(ns).ok());
  BOOST_REQUIRE(store->append_message("s", msg("user", "before")).ok());
  // The server ends every connection: the next call finds its pooled
  // connection dead, replaces it and succeeds.
  BOOST_TEST(pg.drop_connections(db) >= 1);
  auto a = store->append_message("s", msg("user", "after"));
  BOOST_TEST(a.ok(), a.error);
  // The database goes away: calls fail with unavailable, nothing half
  // written; it comes back: the same store works again.
  pg.stop();
  auto down = store->append_message("s", msg("user", "while down"));
  BOOST_TEST(!down.ok());
  BOOST_TEST(down.code == status_code::unavailable);
  BOOST_TEST(contains(down.error, "store unavailable"), down.error);
  BOOST_TEST(store->get_session("s").code == status_code::unavailable);
  std::string why;
  BOOST_REQUIRE_MESSAGE(pg.restart(why), why);
  auto back = store->append_message("s", msg("user", "back"));
  BOOST_TEST(back.ok(), back.error);
  auto loaded = store->load_messages("s");
  BOOST_REQUIRE(loaded.ok());
  BOOST_TEST(loaded->size() == 3u);
  BOOST_TEST(store->get_session("s")->message_count == 3);
  BOOST_TEST(store->verify().ok(), store->verify().error);
}

BOOST_AUTO_TEST_CASE(bad_urls_name_the_problem) {
  pg_store_options o;
  o.url = "postgresql://mibyan@127.0.0.1:1/none";
  auto r = pg_session_store::open(o);
  BOOST_TEST(r.code == status_code::unavailable);
  BOOST_TEST(contains(r.error, "127.0.0.1"), r.error);
  o.url = "postgresql://[bad";
  r = pg_session_store::open(o);
  BOOST_TEST(r.code == status_code::config_invalid, r.error);
  o.url = pg.url("no_such_db");
  r = pg_session_store::open(o);
  BOOST_TEST(r.code == status_code::not_found, r.error);
  BOOST_TEST(contains(r.error, "no_such_db"), r.error);
  // TLS settings reach libpq: this server has no TLS, so requiring it
  // fails with libpq's reason.
  o.url = pg.tcp_url(db) + "?sslmode=require";
  o.password = test::pg_server::password();
  r = pg_session_store::open(o);
  BOOST_TEST(!r.ok());
  BOOST_TEST(contains(r.error, "SSL"), r.error);
}

BOOST_AUTO_TEST_CASE(a_server_that_never_answers_times_out) {
  // A socket that accepts connections (the kernel's backlog) and never
  // says a word.
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  BOOST_REQUIRE(fd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  BOOST_REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  BOOST_REQUIRE(::listen(fd, 8) == 0);
  BOOST_REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  pg_store_options o;
  o.url = "postgresql://mibyan@127.0.0.1:" + std::to_string(ntohs(a.sin_port))
          + "/x?connect_timeout=2";
  auto r = pg_session_store::open(o);
  ::close(fd);
  BOOST_TEST(r.code == status_code::unavailable, r.error);
  BOOST_TEST(contains(r.error, "127.0.0.1"), r.error);
  BOOST_TEST(contains(r.error, "timeout"), r.error);
}

BOOST_AUTO_TEST_CASE(password_from_options_not_the_url) {
  pg_store_options o;
  o.url = pg.tcp_url(db);
  ::unsetenv("PGPASSWORD");
  auto r = pg_session_store::open(o);
  BOOST_TEST(r.code == status_code::permission_denied, r.error);
  BOOST_TEST(!contains(r.error, test::pg_server::password()));
  o.password = test::pg_server::password();
  r = pg_session_store::open(o);
  BOOST_TEST(r.ok(), r.error);
  // libpq's own PGPASSWORD works as well.
  o.password.clear();
  ::setenv("PGPASSWORD", test::pg_server::password(), 1);
  r = pg_session_store::open(o);
  ::unsetenv("PGPASSWORD");
  BOOST_TEST(r.ok(), r.error);
}

BOOST_AUTO_TEST_CASE(migrations_are_versioned_and_a_newer_schema_refused) {
  auto o = options();
  o.auto_migrate = false;
  auto r = pg_session_store::open(o);
  BOOST_TEST(!r.ok());
  BOOST_TEST(contains(r.error, "mibyan store migrate"), r.error);
  std::vector<std::pair<int, int>> steps;
  o.on_migrate = [&](int a, int b) { steps.emplace_back(a, b); };
  auto m = pg_session_store::migrate(o);
  BOOST_REQUIRE_MESSAGE(m.ok(), m.error);
  BOOST_TEST(m->first == 0);
  BOOST_TEST(m->second == 2);
  BOOST_TEST(steps.size() == 2u);
  // Again: nothing to do.
  m = pg_session_store::migrate(o);
  BOOST_TEST(m->first == 2);
  BOOST_TEST(steps.size() == 2u);
  BOOST_TEST(pg_session_store::open(o).ok());
  // A database of version 1 (before per-user state) gets step 2 only, and
  // keeps its sessions.
  {
    auto s = pg_session_store::open(o);
    BOOST_REQUIRE(s.ok());
    new_session ns;
    ns.id = "kept";
    BOOST_REQUIRE((*s)->create_session(ns).ok());
  }
  pg.psql(db, "DROP TABLE mibyan_user_state; DROP SEQUENCE "
              "mibyan_user_state_versions; UPDATE mibyan_schema SET "
              "version = 1");
  steps.clear();
  m = pg_session_store::migrate(o);
  BOOST_REQUIRE_MESSAGE(m.ok(), m.error);
  BOOST_TEST(m->first == 1);
  BOOST_REQUIRE(steps.size() == 1u);
  BOOST_TEST(steps[0].first == 1);
  BOOST_TEST(steps[0].second == 2);
  {
    auto s = pg_session_store::open(o);
    BOOST_REQUIRE(s.ok());
    BOOST_TEST((*s)->get_session("kept").ok());
    auto us = open_user_state_store(**s);
    BOOST_REQUIRE_MESSAGE(us.ok(), us.error);
    user_doc_write w;
    w.name = "MEMORY.md";
    w.bytes = "after the migration";
    w.expected = 0;
    BOOST_TEST((*us)->write(user_state_kind::memory, {w}).ok());
  }
  pg.psql(db, "UPDATE mibyan_schema SET version = 99");
  r = pg_session_store::open(options());
  BOOST_TEST(r.code == status_code::data_corrupt);
  BOOST_TEST(contains(r.error, "newer than this build"), r.error);
  BOOST_TEST(!pg_session_store::migrate(o).ok());
}

BOOST_AUTO_TEST_CASE(concurrent_migrations_run_once) {
  std::atomic<int> stepped{0};
  std::vector<std::thread> ts;
  std::atomic<int> ok{0};
  for (int i = 0; i < 4; ++i)
    ts.emplace_back([&] {
      auto o = options();
      o.on_migrate = [&](int, int) { ++stepped; };
      auto r = pg_session_store::open(o);
      if (r.ok())
        ++ok;
      else
        BOOST_TEST_MESSAGE("open failed: " << r.error);
    });
  for (auto& t : ts)
    t.join();
  BOOST_TEST(ok == 4);
  BOOST_TEST(stepped == 2);
}

BOOST_AUTO_TEST_CASE(two_gateways_append_to_one_session_without_loss) {
  auto a = open();
  auto b = open();
  new_session ns;
  ns.id = "shared";
  BOOST_REQUIRE(a->create_session(ns).ok());
  constexpr int per = 40;
  std::atomic<int> failures{0};
  auto writer = [&](pg_session_store* s, const std::string& tag) {
    for (int i = 0; i < per; ++i) {
      // Every message twice with the same key: stored once.
      auto key = tag + std::to_string(i);
      for (int k = 0; k < 2; ++k)
        if (!s->append_message("shared", msg("user", key), key).ok())
          ++failures;
    }
  };
  std::thread t1(writer, a.get(), "a");
  std::thread t2(writer, b.get(), "b");
  std::thread t3(writer, b.get(), "a");  // the same keys from the other
  t1.join();
  t2.join();
  t3.join();
  BOOST_TEST(failures == 0);
  auto loaded = a->load_messages("shared");
  BOOST_REQUIRE(loaded.ok());
  BOOST_TEST(loaded->size() == size_t{2 * per});
  std::set<std::string> keys;
  uint64_t prev = 0;
  for (auto& m : *loaded) {
    keys.insert(m.key);
    BOOST_TEST(m.id > prev);
    prev = m.id;
  }
  BOOST_TEST(keys.size() == size_t{2 * per});
  BOOST_TEST(b->get_session("shared")->message_count == 2 * per);
  BOOST_TEST(a->verify(true).ok(), a->verify(true).error);
}

BOOST_AUTO_TEST_CASE(cron_runs_are_pruned_and_cascade) {
  auto store = open();
  cron_job_record j;
  j.id = "job_1";
  j.name = "n";
  j.prompt = "p";
  BOOST_REQUIRE(store->put_cron_job(j).ok());
  for (int i = 0; i < 5; ++i) {
    cron_run_record r;
    r.id = "run_" + std::to_string(i);
    r.job_id = "job_1";
    r.status = "ok";
    BOOST_REQUIRE(store->put_cron_run(r, 3).ok());
  }
  bool more = true;
  auto runs = store->list_cron_runs("job_1", 10, 0, &more);
  BOOST_REQUIRE(runs.ok());
  BOOST_TEST(runs->size() == 3u);
  BOOST_TEST(runs->front().id == "run_4");
  BOOST_TEST(!more);
  BOOST_TEST(store->get_cron_run("run_0").code == status_code::not_found);
  cron_run_record other;
  other.id = "run_4";
  other.job_id = "job_2";
  BOOST_TEST(store->put_cron_run(other, 3).code != status_code::ok);
  BOOST_REQUIRE(store->delete_cron_job("job_1").ok());
  BOOST_TEST(store->get_cron_run("run_4").code == status_code::not_found);
  BOOST_TEST(store->delete_cron_job("job_1").code == status_code::not_found);
}

BOOST_AUTO_TEST_SUITE_END()

// TLS is libpq's: the URL's sslmode reaches it unchanged, and the
// connection is encrypted (the server says so) and verified against the
// certificate the URL names.
BOOST_AUTO_TEST_CASE(tls_when_the_url_asks) {
  std::string why;
  test::pg_server_options so;
  so.tls = true;
  auto pg = test::pg_server::start(why, so);
  BOOST_REQUIRE_MESSAGE(pg, why);
  auto db = pg->fresh_database();
  pg_store_options o;
  o.password = test::pg_server::password();
  o.url = pg->tcp_url(db) + "?sslmode=verify-full&sslrootcert="
          + pg->cert_file();
  auto store = pg_session_store::open(o);
  BOOST_REQUIRE_MESSAGE(store.ok(), store.error);
  new_session ns;
  ns.id = "over-tls";
  BOOST_TEST((*store)->create_session(ns).ok());
  pg::connect_options co;
  co.url = o.url;
  co.password = o.password;
  auto c = pg::connection::open(co);
  BOOST_REQUIRE_MESSAGE(c.ok(), c.error);
  auto r = (*c)->exec("SELECT ssl FROM pg_stat_ssl WHERE pid = "
                      "pg_backend_pid()",
                      {}, "tls check");
  BOOST_REQUIRE_MESSAGE(r.ok(), r.error);
  BOOST_TEST(r->boolean(0, 0));
  // A client told to verify against a certificate file that does not
  // exist is refused by libpq, naming it.
  o.url = pg->tcp_url(db) + "?sslmode=verify-full&sslrootcert="
          + pg->dir() + "/missing.crt";
  auto bad = pg_session_store::open(o);
  BOOST_TEST(!bad.ok());
  BOOST_TEST(contains(bad.error, "missing.crt"), bad.error);
}
