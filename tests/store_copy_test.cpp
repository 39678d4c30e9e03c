// `mibyan store copy` between LMDB and PostgreSQL (a throw-away server,
// tests/support/pg_server.hpp), as a real process: a round trip keeps every
// session, message (byte for byte), key, timestamp, counter, approval, cron
// job, stored response (pointing at the same message), system prompt and
// kernel checkpoint; running it again changes nothing; a session that differs is a
// conflict and one only in the destination is reported; a password on the
// command line and an unreachable URL are refused with one line.
#define BOOST_TEST_MODULE store_copy
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>

#include "storage/checkpoint_store.hpp"
#include "storage/postgres/pg_session_store.hpp"
#include "storage/prompt_store.hpp"
#include "storage/session_store.hpp"
#include "storage/user_state_store.hpp"
#include "tests/support/pg_server.hpp"
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mibyan;

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// How many sessions the round trip copies (MIBYAN_TEST_COPY_SESSIONS
// raises it; the issue's figure is 10,000).
int session_count() {
  const char* n = std::getenv("MIBYAN_TEST_COPY_SESSIONS");
  return n && *n ? std::atoi(n) : 300;
}

// Fills `store` with `n` sessions: chains (parent links), tool calls,
// keys, usage, ended sessions, approvals, odd bytes, and two cron jobs.
// Written in group commits of 100 sessions (one fsync each).
void fill(session_store& store, int n) {
  std::vector<store_write> group;
  auto flush = [&] {
    auto st = store.commit_group(group);
    BOOST_REQUIRE_MESSAGE(st.ok(), st.error);
    for (auto& w : group)
      BOOST_REQUIRE_MESSAGE(w.status.ok(), w.status.error);
    group.clear();
  };
  for (int i = 0; i < n; ++i) {
    store_write cw;
    cw.what = store_write::kind::create;
    auto& ns = cw.create;
    ns.id = "s" + std::to_string(i);
    ns.title = "session " + std::to_string(i);
    ns.model = "m";
    ns.started_at_ms = 1700000000000 + i * 1000;
    if (i % 10 == 5)
      ns.parent_session_id = "s" + std::to_string(i - 1);
    if (i % 7 == 0)
      ns.metadata_json = R"({"cron_job_id":"job_a","n":)"
                         + std::to_string(i) + "}";
    group.push_back(cw);
    for (int m = 0; m < 1 + i % 6; ++m) {
      store_write aw;
      aw.what = store_write::kind::append;
      auto& p = aw.append;
      p.session_id = ns.id;
      p.message.role = m % 3 == 0 ? "user" : m % 3 == 1 ? "assistant" : "tool";
      p.message.content = "message " + std::to_string(m) + " of " + ns.id
                          + (m == 2 ? std::string{"\0nul\ttab é ✓", 15} : "");
      p.message.timestamp_ms = 1700000000000 + i * 1000 + m;
      if (p.message.role == "assistant") {
        p.message.tool_calls.push_back(
          tool_call{"call_" + std::to_string(m), "terminal",
                    R"({"command":"echo )" + std::to_string(i) + R"("})"});
        p.message.reasoning = "thinking";
        p.message.finish_reason = "tool_calls";
      }
      if (p.message.role == "tool") {
        p.message.tool_call_id = "call_1";
        p.message.tool_name = "terminal";
      }
      if (m % 2 == 0)
        p.key = "k" + std::to_string(m);
      group.push_back(std::move(aw));
    }
    store_write uw;
    uw.what = store_write::kind::usage;
    uw.session_id = ns.id;
    uw.usage.input_tokens = 100 + i;
    uw.usage.output_tokens = 7;
    if (i % 3 == 0) {
      uw.usage.cost_usd = 0.25;
      uw.usage.has_cost = true;
    }
    uw.api_calls = 2;
    group.push_back(uw);
    if (i % 4 == 0) {
      store_write ew;
      ew.what = store_write::kind::end;
      ew.session_id = ns.id;
      ew.reason = "compression";
      group.push_back(ew);
    }
    if (i % 100 == 99)
      flush();
  }
  flush();
  for (int i = 0; i < n; i += 50)
    BOOST_REQUIRE(store.set_approvals("s" + std::to_string(i),
                                      {"rm -rf", "git push"})
                    .ok());
  for (const char* id : {"job_a", "job_b"}) {
    cron_job_record j;
    j.id = id;
    j.name = id;
    j.schedule = "every 2h";
    j.prompt = "hello";
    BOOST_REQUIRE(store.put_cron_job(j).ok());
    for (int r = 0; r < 3; ++r) {
      cron_run_record run;
      run.id = std::string{"run_"} + id + std::to_string(r);
      run.job_id = id;
      run.status = "ok";
      run.result = "done " + std::to_string(r);
      BOOST_REQUIRE(store.put_cron_run(run, 0).ok());
    }
  }
}

// The records beside the sessions: a stored response of every tenth
// session (pointing at its last message), the system prompt of every
// fifth (one text shared by many, one of their own), a kernel checkpoint
// of every ninth.
void fill_side_records(std::shared_ptr<session_store> store, int n) {
  auto prompts = open_prompt_store(*store);
  BOOST_REQUIRE_MESSAGE(prompts.ok(), prompts.error);
  auto ckpts = open_checkpoint_store(store);
  BOOST_REQUIRE_MESSAGE(ckpts.ok(), ckpts.error);
  for (int i = 0; i < n; ++i) {
    auto id = "s" + std::to_string(i);
    if (i % 10 == 3) {
      stored_response r;
      r.id = "resp_" + std::to_string(i);
      r.session_id = id;
      auto last = store->last_message_id(id);
      BOOST_REQUIRE(last.ok());
      r.last_message_id = *last;
      r.created_at_ms = 1700000000000 + i;
      r.object_json = R"({"id":"resp_)" + std::to_string(i)
                      + R"(","output_text":"answer é"})";
      BOOST_REQUIRE(store->put_response(r).ok());
    }
    if (i % 5 == 1) {
      auto text = i % 15 == 1 ? "You are Mibyan, prompt of " + id
                              : std::string{"the shared prompt\n\twith "
                                            "bytes \xc3\xa9"};
      auto put = (*prompts)->put(id, text);
      BOOST_REQUIRE_MESSAGE(put.ok(), put.error);
    }
    if (i % 9 == 2) {
      std::string bytes(3000 + i, '\0');
      for (size_t k = 0; k < bytes.size(); ++k)
        bytes[k] = static_cast<char>((k * 31 + i) & 0xff);
      auto st = (*ckpts)->put(id, 4 + i % 3, bytes);
      BOOST_REQUIRE_MESSAGE(st.ok(), st.error);
    }
  }
  // The per-user state (storage/user_state_store.hpp): 7 documents.
  auto us = open_user_state_store(*store);
  BOOST_REQUIRE_MESSAGE(us.ok(), us.error);
  auto put = [&](user_state_kind k, std::string name, std::string bytes) {
    user_doc_write w;
    w.name = std::move(name);
    w.bytes = std::move(bytes);
    auto r = (*us)->write(k, {w});
    BOOST_REQUIRE_MESSAGE(r.ok(), r.error);
  };
  put(user_state_kind::memory, "MEMORY.md", "Uses tabs.\n§\nDeploys on Fridays \xc3\xa9\n");
  put(user_state_kind::memory, "USER.md", "Name: Ada.\n");
  put(user_state_kind::skill, "pets/pixel-care/SKILL.md",
      "---\nname: pixel-care\ndescription: d\n---\nFeed PIXEL.\n");
  put(user_state_kind::skill, "pets/pixel-care/assets/icon.bin",
      std::string{"\0\x01\xff\x80", 4});
  put(user_state_kind::skill, "deploy/SKILL.md",
      "---\nname: deploy\ndescription: d\n---\nShip it.\n");
  put(user_state_kind::allowlist, "recursive rm", "");
  put(user_state_kind::allowlist, "git push --force", "");
}

// Both stores hold the same per-user documents (names and bytes).
void expect_same_user_state(session_store& a, session_store& b) {
  auto ua = open_user_state_store(a);
  auto ub = open_user_state_store(b);
  BOOST_REQUIRE(ua.ok() && ub.ok());
  size_t docs = 0;
  for (auto k : user_state_kinds()) {
    auto da = (*ua)->list(k, true);
    auto db = (*ub)->list(k, true);
    BOOST_REQUIRE(da.ok() && db.ok());
    BOOST_REQUIRE_EQUAL(da->size(), db->size());
    for (size_t i = 0; i < da->size(); ++i) {
      BOOST_TEST((*da)[i].name == (*db)[i].name);
      BOOST_TEST((*da)[i].bytes == (*db)[i].bytes);
    }
    docs += da->size();
  }
  BOOST_TEST(docs == 7u);
}

// The side records of `a` and `b` are the same (responses point at the
// message in the same position).
void expect_same_side_records(std::shared_ptr<session_store> a,
                              std::shared_ptr<session_store> b, int n) {
  auto pa = open_prompt_store(*a);
  auto pb = open_prompt_store(*b);
  auto ca = open_checkpoint_store(a);
  auto cb = open_checkpoint_store(b);
  BOOST_REQUIRE(pa.ok() && pb.ok() && ca.ok() && cb.ok());
  size_t responses = 0, prompts = 0, ckpts = 0;
  for (int i = 0; i < n; ++i) {
    auto id = "s" + std::to_string(i);
    BOOST_TEST_CONTEXT("session " << id) {
      auto ra = a->list_responses(id);
      auto rb = b->list_responses(id);
      BOOST_REQUIRE(ra.ok() && rb.ok());
      BOOST_REQUIRE_EQUAL(ra->size(), rb->size());
      if (!ra->empty()) {
        auto ma = a->load_messages(id);
        auto mb = b->load_messages(id);
        for (size_t k = 0; k < ra->size(); ++k) {
          auto& x = (*ra)[k];
          auto& y = (*rb)[k];
          BOOST_TEST(x.id == y.id);
          BOOST_TEST(x.object_json == y.object_json);
          BOOST_TEST(x.created_at_ms == y.created_at_ms);
          size_t pos = 0;
          while (pos < ma->size() && (*ma)[pos].id != x.last_message_id)
            ++pos;
          BOOST_REQUIRE(pos < ma->size() && pos < mb->size());
          BOOST_TEST(y.last_message_id == (*mb)[pos].id);
          ++responses;
        }
      }
      auto ha = (*pa)->hash_of(id);
      auto hb = (*pb)->hash_of(id);
      BOOST_TEST(ha.ok() == hb.ok());
      if (ha.ok() && hb.ok()) {
        BOOST_TEST(*ha == *hb);
        BOOST_TEST(*(*pa)->get(*ha) == *(*pb)->get(*hb));
        ++prompts;
      }
      auto ka = (*ca)->latest(id);
      auto kb = (*cb)->latest(id);
      BOOST_REQUIRE(ka.ok() && kb.ok());
      BOOST_TEST(ka->has_value() == kb->has_value());
      if (*ka && *kb) {
        BOOST_TEST((**ka).seq == (**kb).seq);
        BOOST_TEST((**ka).bytes == (**kb).bytes);
        ++ckpts;
      }
    }
  }
  BOOST_TEST(responses == static_cast<size_t>((n + 6) / 10));
  BOOST_TEST(prompts == static_cast<size_t>((n + 3) / 5));
  BOOST_TEST(ckpts == static_cast<size_t>((n + 6) / 9));
}

template <class A, class B>
void expect_same(A& a, B& b, int n) {
  auto la = a.list_sessions(static_cast<size_t>(n) + 10, 0);
  auto lb = b.list_sessions(static_cast<size_t>(n) + 10, 0);
  BOOST_REQUIRE(la.ok());
  BOOST_REQUIRE(lb.ok());
  BOOST_REQUIRE_EQUAL(la->size(), lb->size());
  for (size_t i = 0; i < la->size(); ++i) {
    auto& x = (*la)[i];
    auto& y = (*lb)[i];
    BOOST_TEST_CONTEXT("session " << x.id) {
      BOOST_TEST(x.id == y.id);
      BOOST_TEST(x.title == y.title);
      BOOST_TEST(x.parent_session_id == y.parent_session_id);
      BOOST_TEST(x.metadata_json == y.metadata_json);
      BOOST_TEST(x.started_at_ms == y.started_at_ms);
      BOOST_TEST(x.ended_at_ms == y.ended_at_ms);
      BOOST_TEST(x.end_reason == y.end_reason);
      BOOST_TEST(x.message_count == y.message_count);
      BOOST_TEST(x.tool_call_count == y.tool_call_count);
      BOOST_TEST(x.api_call_count == y.api_call_count);
      BOOST_TEST(x.tokens.input_tokens == y.tokens.input_tokens);
      BOOST_TEST(x.tokens.has_cost == y.tokens.has_cost);
      BOOST_TEST(x.tokens.cost_usd == y.tokens.cost_usd);
      BOOST_TEST(*a.get_approvals(x.id) == *b.get_approvals(y.id));
      auto ma = a.load_messages(x.id);
      auto mb = b.load_messages(y.id);
      BOOST_REQUIRE(ma.ok());
      BOOST_REQUIRE(mb.ok());
      BOOST_REQUIRE_EQUAL(ma->size(), mb->size());
      for (size_t k = 0; k < ma->size(); ++k) {
        auto& p = (*ma)[k];
        auto& q = (*mb)[k];
        BOOST_TEST(p.key == q.key);
        BOOST_TEST(p.message.content == q.message.content);
        BOOST_TEST(p.message.role == q.message.role);
        BOOST_TEST(p.message.reasoning == q.message.reasoning);
        BOOST_TEST(p.message.tool_call_id == q.message.tool_call_id);
        BOOST_TEST(p.message.timestamp_ms == q.message.timestamp_ms);
        BOOST_TEST(p.message.tool_calls.size() == q.message.tool_calls.size());
      }
    }
  }
  auto ja = a.list_cron_jobs(false);
  auto jb = b.list_cron_jobs(false);
  BOOST_REQUIRE_EQUAL(ja->jobs.size(), jb->jobs.size());
  for (auto& j : ja->jobs) {
    auto ra = a.list_cron_runs(j.id, 100, 0, nullptr);
    auto rb = b.list_cron_runs(j.id, 100, 0, nullptr);
    BOOST_REQUIRE_EQUAL(ra->size(), rb->size());
    for (size_t k = 0; k < ra->size(); ++k)
      BOOST_TEST((*ra)[k].id == (*rb)[k].id);
  }
}

struct fixture {
  test::pg_server& pg = test::shared_pg_server();
  test::temp_dir home;
  test::process_options po;
  fixture() { po.env["MIBYAN_HOME"] = home.path(); po.timeout_seconds = 600; }

  std::unique_ptr<session_store> lmdb(const std::string& dir) {
    session_store_options o;
    o.dir = dir;
    auto r = session_store::open(o);
    BOOST_REQUIRE_MESSAGE(r.ok(), r.error);
    return std::move(*r);
  }
  std::unique_ptr<pg_session_store> postgres(const std::string& db) {
    pg_store_options o;
    o.url = pg.url(db);
    auto r = pg_session_store::open(o);
    BOOST_REQUIRE_MESSAGE(r.ok(), r.error);
    return std::move(*r);
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(store_copy, fixture)

BOOST_AUTO_TEST_CASE(round_trip_lmdb_postgres_lmdb) {
  const int n = session_count();
  auto src_dir = home / "src";
  {
    std::shared_ptr<session_store> src = lmdb(src_dir);
    fill(*src, n);
    fill_side_records(src, n);
  }
  auto db = pg.fresh_database();
  auto t0 = std::chrono::steady_clock::now();
  auto r = test::run_mibyan({"store", "copy", "--from", "lmdb:" + src_dir,
                             "--to", "postgres:" + pg.url(db)},
                            po);
  auto secs = std::chrono::duration<double>(
                std::chrono::steady_clock::now() - t0).count();
  BOOST_TEST_MESSAGE("lmdb -> postgres, " << n << " sessions: " << secs
                                          << " s");
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.out + r.err);
  BOOST_TEST(contains(r.out, "copied " + std::to_string(n) + " sessions ("
                               + std::to_string(n) + " new"),
             r.out);
  BOOST_TEST(contains(r.err, "mibyan store copy: copied"), r.err);
  {
    std::shared_ptr<session_store> a = lmdb(src_dir);
    std::shared_ptr<session_store> b = postgres(db);
    expect_same(*a, *b, n);
    expect_same_side_records(a, b, n);
    expect_same_user_state(*a, *b);
    BOOST_TEST(b->verify(true).ok(), b->verify(true).error);
  }
  BOOST_TEST(contains(r.out, " 7 user state documents in "), r.out);
  // Again: nothing new.
  r = test::run_mibyan({"store", "copy", "--from", "lmdb:" + src_dir,
                        "--to", "postgres:" + pg.url(db)},
                       po);
  BOOST_TEST(r.exit_code == 0, r.out + r.err);
  BOOST_TEST(contains(r.out, "0 new, 0 completed, " + std::to_string(n)
                               + " unchanged"),
             r.out);
  BOOST_TEST(contains(r.out, " 0 user state documents in "), r.out);
  BOOST_TEST(*postgres(db)->message_count() == *lmdb(src_dir)->message_count());
  // And back into a new LMDB store.
  auto back_dir = home / "back";
  t0 = std::chrono::steady_clock::now();
  r = test::run_mibyan({"store", "copy", "--from", "postgres:" + pg.url(db),
                        "--to", "lmdb:" + back_dir},
                       po);
  secs = std::chrono::duration<double>(
           std::chrono::steady_clock::now() - t0).count();
  BOOST_TEST_MESSAGE("postgres -> lmdb, " << n << " sessions: " << secs
                                          << " s");
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.out + r.err);
  std::shared_ptr<session_store> a = lmdb(src_dir);
  std::shared_ptr<session_store> c = lmdb(back_dir);
  expect_same(*a, *c, n);
  expect_same_side_records(a, c, n);
  expect_same_user_state(*a, *c);
  BOOST_TEST(c->verify(true).ok(), c->verify(true).error);
}

BOOST_AUTO_TEST_CASE(resumes_reports_conflicts_and_extra_sessions) {
  auto src_dir = home / "src";
  fill(*lmdb(src_dir), 12);
  auto db = pg.fresh_database();
  {
    // The destination already has: s1 with the first message only (an
    // interrupted copy), s2 with a different first message (a conflict)
    // and "extra", which the source does not have.
    auto p = postgres(db);
    auto src = lmdb(src_dir);
    for (const char* id : {"s1", "s2", "extra"}) {
      new_session ns;
      ns.id = id;
      ns.title = std::string{"session "} + (id + 1);
      ns.model = "m";
      ns.started_at_ms = std::string{id} == "s1" ? 1700000001000
                         : std::string{id} == "s2" ? 1700000002000 : 5;
      BOOST_REQUIRE(p->create_session(ns).ok());
    }
    auto first = src->load_messages("s1");
    BOOST_REQUIRE(p->append_message("s1", first->at(0).message,
                                    first->at(0).key).ok());
    chat_message other;
    other.role = "user";
    other.content = "not what the source has";
    BOOST_REQUIRE(p->append_message("s2", other).ok());
  }
  auto r = test::run_mibyan({"store", "copy", "--from", "lmdb:" + src_dir,
                             "--to", "postgres:" + pg.url(db)},
                            po);
  BOOST_TEST(r.exit_code == 1, r.out + r.err);
  BOOST_TEST(contains(r.out, "conflict, not copied: s2: message 1 differs"),
             r.out);
  BOOST_TEST(contains(r.out, "only in the destination (not in the source): "
                             "extra"),
             r.out);
  BOOST_TEST(contains(r.out, "1 completed"), r.out);
  auto p = postgres(db);
  auto src = lmdb(src_dir);
  BOOST_TEST(p->load_messages("s1")->size() == src->load_messages("s1")->size());
  BOOST_TEST(p->load_messages("s2")->size() == 1u);
  BOOST_TEST(p->verify().ok(), p->verify().error);
}

BOOST_AUTO_TEST_CASE(bad_endpoints_exit_2_with_one_line) {
  auto db = pg.fresh_database();
  auto src_dir = home / "src";
  fill(*lmdb(src_dir), 1);
  auto r = test::run_mibyan(
    {"store", "copy", "--from", "lmdb:" + src_dir, "--to",
     "postgres:postgresql://mibyan:secret@127.0.0.1:1/x"},
    po);
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(contains(r.err, "carries a password"), r.err);
  BOOST_TEST(!contains(r.err, "secret"), r.err);
  r = test::run_mibyan({"store", "copy", "--from", "lmdb:" + src_dir,
                        "--to", "postgres:postgresql://mibyan@127.0.0.1:1/x"},
                       po);
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(contains(r.err, "127.0.0.1"), r.err);
  BOOST_TEST(std::count(r.err.begin(), r.err.end(), '\n') == 1, r.err);
  r = test::run_mibyan({"store", "copy", "--from", "sqlite:x", "--to",
                        "lmdb:" + (home / "y")},
                       po);
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(contains(r.err, "unknown backend 'sqlite'"), r.err);
  r = test::run_mibyan({"store", "migrate", "--url", pg.url(db)}, po);
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(contains(r.out, "migrated schema version 0 to 2"), r.out);
  r = test::run_mibyan({"store", "migrate", "--url", pg.url(db)}, po);
  BOOST_TEST(contains(r.out, "schema is current"), r.out);
}

// storage.backend: postgres at start-up: a wrong or unreachable URL, or a
// database without the schema (auto_migrate off), ends `serve` and `node`
// with exit 2 and one line; `store migrate` without --url migrates the
// configured database, after which serve gets past the store.
BOOST_AUTO_TEST_CASE(start_up_refuses_a_bad_store_in_one_line) {
  auto db = pg.fresh_database();
  auto config = [&](const std::string& url) {
    home.write("config.yaml", "storage:\n  backend: postgres\n  postgres:\n"
                              "    url: \"" + url + "\"\n");
  };
  config("postgresql://mibyan@127.0.0.1:1/x");
  for (auto argv : {std::vector<std::string>{"serve", "--listen",
                                             "127.0.0.1:0"},
                    std::vector<std::string>{"node", "--listen",
                                             "127.0.0.1:0"}}) {
    auto r = test::run_mibyan(argv, po);
    BOOST_TEST(r.exit_code == 2, argv[0] << ": " << r.out << r.err);
    BOOST_TEST(contains(r.err, "127.0.0.1:1"), r.err);
    BOOST_TEST(std::count(r.err.begin(), r.err.end(), '\n') == 1, r.err);
  }
  config(pg.url(db));
  auto r = test::run_mibyan({"serve", "--listen", "127.0.0.1:0"}, po);
  BOOST_TEST(r.exit_code == 2, r.out + r.err);
  BOOST_TEST(contains(r.err, "mibyan store migrate"), r.err);
  r = test::run_mibyan({"store", "migrate"}, po);
  BOOST_TEST(r.exit_code == 0, r.out + r.err);
  BOOST_TEST(contains(r.out, "migrated schema version 0 to 2"), r.out);
  pg.psql(db, "UPDATE mibyan_schema SET version = 7");
  r = test::run_mibyan({"serve", "--listen", "127.0.0.1:0"}, po);
  BOOST_TEST(r.exit_code == 2, r.out + r.err);
  BOOST_TEST(contains(r.err, "newer than this build"), r.err);
}

BOOST_AUTO_TEST_SUITE_END()
