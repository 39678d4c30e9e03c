// The per-user state store (storage/user_state_store.hpp): versioned
// documents with compare-and-set, all-or-nothing batches, the contract's
// limits, and no lost update under concurrent writers - run on every
// backend of the build (tests/support/store_backends.hpp). Plus, on
// PostgreSQL: a database that goes away fails writes as unavailable with
// nothing half-written, and the store recovers when it is back.
#define BOOST_TEST_MODULE user_state_store
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <ostream>
#include <thread>

#include "storage/postgres/pg_session_store.hpp"
#include "storage/user_state_store.hpp"
#include "tests/support/pg_server.hpp"
#include "tests/support/store_backends.hpp"

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

using kind = user_state_kind;

user_doc_write put(std::string name, std::string bytes,
                   uint64_t expected = user_doc_any_version) {
  user_doc_write w;
  w.name = std::move(name);
  w.bytes = std::move(bytes);
  w.expected = expected;
  return w;
}

user_doc_write erase(std::string name,
                     uint64_t expected = user_doc_any_version) {
  user_doc_write w;
  w.name = std::move(name);
  w.erase = true;
  w.expected = expected;
  return w;
}

struct fixture : test::store_fixture {
  std::unique_ptr<user_state_store> us;
  void opened() override {
    open_with(base);
    auto r = open_user_state_store(*store);
    BOOST_REQUIRE_MESSAGE(r.ok(), r.error);
    us = std::move(*r);
  }
};

} // namespace

BOOST_AUTO_TEST_SUITE(user_state_contract)

MIBYAN_STORE_TEST_CASE(documents_are_versioned_and_compared, fixture) {
  auto v1 = us->write(kind::memory, {put("MEMORY.md", "one", 0)});
  BOOST_REQUIRE_MESSAGE(v1.ok(), v1.error);
  BOOST_REQUIRE(v1->size() == 1u);
  BOOST_TEST((*v1)[0] > 0u);
  auto got = us->get(kind::memory, "MEMORY.md");
  BOOST_REQUIRE_MESSAGE(got.ok(), got.error);
  BOOST_TEST(got->bytes == "one");
  BOOST_TEST(got->version == (*v1)[0]);
  BOOST_TEST(got->updated_at_ms > 0);
  // "Must not exist" on an existing document: a conflict.
  auto again = us->write(kind::memory, {put("MEMORY.md", "two", 0)});
  BOOST_TEST(again.code == status_code::already_exists);
  BOOST_TEST(contains(again.error, "conflict: memory document 'MEMORY.md'"),
             again.error);
  // The version read: accepted, and the version grows.
  auto v2 = us->write(kind::memory, {put("MEMORY.md", "two", (*v1)[0])});
  BOOST_REQUIRE_MESSAGE(v2.ok(), v2.error);
  BOOST_TEST((*v2)[0] > (*v1)[0]);
  // A stale version: refused, the document keeps the newer bytes.
  auto stale = us->write(kind::memory, {put("MEMORY.md", "lost", (*v1)[0])});
  BOOST_TEST(stale.code == status_code::already_exists);
  BOOST_TEST(us->get(kind::memory, "MEMORY.md")->bytes == "two");
  // Delete with the version, then create again: versions are never
  // reused, so a reader of the old document cannot overwrite the new one.
  BOOST_REQUIRE(us->write(kind::memory, {erase("MEMORY.md", (*v2)[0])}).ok());
  BOOST_TEST(us->get(kind::memory, "MEMORY.md").code
             == status_code::not_found);
  BOOST_TEST(us->write(kind::memory, {erase("MEMORY.md", (*v2)[0])}).code
             == status_code::already_exists);
  BOOST_TEST(us->write(kind::memory, {erase("MEMORY.md", 0)}).ok());
  auto v3 = us->write(kind::memory, {put("MEMORY.md", "three", 0)});
  BOOST_REQUIRE(v3.ok());
  BOOST_TEST((*v3)[0] > (*v2)[0]);
  BOOST_TEST(us->write(kind::memory, {put("MEMORY.md", "x", (*v2)[0])}).code
             == status_code::already_exists);
  // Without a comparison: last writer wins.
  BOOST_TEST(us->write(kind::memory, {put("MEMORY.md", "four")}).ok());
  BOOST_TEST(us->get(kind::memory, "MEMORY.md")->bytes == "four");
  // Durable: a reopened store has it.
  us.reset();
  store.reset();
  opened();
  BOOST_TEST(us->get(kind::memory, "MEMORY.md")->bytes == "four");
}

MIBYAN_STORE_TEST_CASE(kinds_are_separate_and_listed_in_name_order,
                       fixture) {
  BOOST_REQUIRE(us->write(kind::skill, {put("b/SKILL.md", "B"),
                                        put("a/SKILL.md", "A"),
                                        put("a/references/x.md", "X")})
                  .ok());
  BOOST_REQUIRE(us->write(kind::allowlist, {put("rm -rf", "")}).ok());
  BOOST_TEST(us->get(kind::memory, "a/SKILL.md").code
             == status_code::not_found);
  auto skills = us->list(kind::skill, true);
  BOOST_REQUIRE_MESSAGE(skills.ok(), skills.error);
  BOOST_REQUIRE(skills->size() == 3u);
  BOOST_TEST((*skills)[0].name == "a/SKILL.md");
  BOOST_TEST((*skills)[0].bytes == "A");
  BOOST_TEST((*skills)[1].name == "a/references/x.md");
  BOOST_TEST((*skills)[2].name == "b/SKILL.md");
  auto names = us->list(kind::skill, false);
  BOOST_REQUIRE(names.ok());
  BOOST_TEST((*names)[0].bytes.empty());
  BOOST_TEST((*names)[0].version == (*skills)[0].version);
  auto allow = us->list(kind::allowlist, true);
  BOOST_REQUIRE(allow.ok());
  BOOST_REQUIRE(allow->size() == 1u);
  BOOST_TEST((*allow)[0].name == "rm -rf");
  BOOST_TEST(us->list(kind::memory, false)->empty());
}

MIBYAN_STORE_TEST_CASE(a_batch_is_all_or_nothing, fixture) {
  auto v = us->write(kind::skill, {put("s/SKILL.md", "v1", 0)});
  BOOST_REQUIRE(v.ok());
  // The second change conflicts: the first is not written either.
  auto r = us->write(kind::skill, {put("s/references/new.md", "new", 0),
                                   put("s/SKILL.md", "v2", 0)});
  BOOST_TEST(r.code == status_code::already_exists);
  BOOST_TEST(us->get(kind::skill, "s/references/new.md").code
             == status_code::not_found);
  BOOST_TEST(us->get(kind::skill, "s/SKILL.md")->bytes == "v1");
  auto ok = us->write(kind::skill, {put("s/references/new.md", "new", 0),
                                    put("s/SKILL.md", "v2", (*v)[0]),
                                    erase("s/gone.md", 0)});
  BOOST_REQUIRE_MESSAGE(ok.ok(), ok.error);
  BOOST_TEST((*ok)[2] == 0u);
  BOOST_TEST(us->list(kind::skill, false)->size() == 2u);
}

MIBYAN_STORE_TEST_CASE(bad_input_is_refused_and_nothing_written, fixture) {
  auto refused = [&](std::vector<user_doc_write> b, const std::string& why) {
    auto r = us->write(kind::memory, b);
    BOOST_TEST(r.code == status_code::invalid_argument, why << ": " << r.error);
    BOOST_TEST(us->list(kind::memory, false)->empty(), why);
  };
  refused({put(std::string(user_state_store::max_doc_bytes + 1, 'x'), "")},
          "long name");
  refused({put("MEMORY.md", std::string(user_state_store::max_doc_bytes + 1,
                                         'x'))},
          "oversize document");
  refused({put("ok.md", "fine"),
           put("MEMORY.md",
               std::string(user_state_store::max_doc_bytes + 1, 'x'))},
          "oversize second document");
  refused({put("", "x")}, "empty name");
  refused({put("a\nb", "x")}, "newline in name");
  refused({put(std::string{"a\0b", 3}, "x")}, "NUL in name");
  refused({put("/abs", "x")}, "absolute name");
  refused({put("\xff\xfe", "x")}, "not UTF-8");
  refused({put("same", "1"), put("same", "2")}, "twice in one batch");
  std::vector<user_doc_write> many;
  for (size_t i = 0; i <= user_state_store::max_batch; ++i)
    many.push_back(put("d" + std::to_string(i), "x"));
  refused(many, "too many changes");
  BOOST_TEST(us->get(kind::memory, "").code == status_code::invalid_argument);
  // The largest document is accepted whole.
  std::string big(user_state_store::max_doc_bytes, 'y');
  BOOST_REQUIRE(us->write(kind::memory, {put("big", big)}).ok());
  BOOST_TEST(us->get(kind::memory, "big")->bytes == big);
}

MIBYAN_STORE_TEST_CASE(concurrent_compare_and_set_loses_no_update,
                       fixture) {
  // Four writers each add 25 to a counter by read, change, compare-and-set,
  // retrying on a conflict: the counter ends at 100.
  BOOST_REQUIRE(us->write(kind::memory, {put("counter", "0", 0)}).ok());
  std::atomic<int> conflicts{0};
  std::atomic<int> failures{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&] {
      for (int i = 0; i < 25; ++i)
        for (int attempt = 0;; ++attempt) {
          auto cur = us->get(kind::memory, "counter");
          if (!cur || attempt > 1000) {
            ++failures;
            return;
          }
          auto n = std::stoi(cur->bytes) + 1;
          auto w = us->write(kind::memory,
                             {put("counter", std::to_string(n), cur->version)});
          if (w)
            break;
          if (w.code != status_code::already_exists) {
            ++failures;
            return;
          }
          ++conflicts;
        }
    });
  for (auto& t : ts)
    t.join();
  BOOST_TEST(failures == 0);
  BOOST_TEST(us->get(kind::memory, "counter")->bytes == "100");
  BOOST_TEST_MESSAGE("conflicts retried: " << conflicts.load());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_CASE(postgres_going_away_is_unavailable_and_recovers) {
  session_store_options o;
  test::temp_dir tmp;
  if (!test::backend_options_or_skip("postgres", tmp.path(), o))
    return;
  // PostgreSQL runs here: a server of this case's own, to stop.
  auto& pg = test::shared_pg_server();
  session_store_options own;
  own.backend = "postgres";
  own.postgres_url = pg.url(pg.fresh_database("away"));
  own.auto_migrate = true;
  auto opened = open_session_store(own);
  BOOST_REQUIRE_MESSAGE(opened.ok(), opened.error);
  auto us = open_user_state_store(**opened);
  BOOST_REQUIRE(us.ok());
  auto v = (*us)->write(kind::memory, {put("MEMORY.md", "before", 0)});
  BOOST_REQUIRE(v.ok());
  pg.stop();
  auto down = (*us)->write(kind::memory,
                           {put("USER.md", "half", 0),
                            put("MEMORY.md", "while down", (*v)[0])});
  BOOST_TEST(down.code == status_code::unavailable, down.error);
  BOOST_TEST(contains(down.error, "store unavailable"), down.error);
  BOOST_TEST((*us)->get(kind::memory, "MEMORY.md").code
             == status_code::unavailable);
  std::string why;
  BOOST_REQUIRE_MESSAGE(pg.restart(why), why);
  // Nothing of the failed batch was written; the store works again.
  auto back = (*us)->get(kind::memory, "MEMORY.md");
  BOOST_REQUIRE_MESSAGE(back.ok(), back.error);
  BOOST_TEST(back->bytes == "before");
  BOOST_TEST((*us)->get(kind::memory, "USER.md").code
             == status_code::not_found);
  BOOST_TEST((*us)->write(kind::memory,
                          {put("MEMORY.md", "after", (*v)[0])})
               .ok());
}
