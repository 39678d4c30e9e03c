// The LMDB session store's own behaviour (storage/lmdb/): its private
// directory, verify finding an inconsistency, one environment per process,
// read-only opens of a missing store, the schema version of a new store
// and its migrations, an old-format index rebuilt, and the map growing
// when full. The contract on every backend: session_store_test.
#define BOOST_TEST_MODULE lmdb_store
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <regex>
#include <thread>

#include <sys/stat.h>

#include "storage/byte_codec.hpp"
#include "storage/lmdb/lmdb_inspect.hpp"
#include "storage/session_store.hpp"
#include "tests/support/session_store_cases.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mibyan;
using test::msg;
using lmdb_fixture = test::lmdb_store_case;

BOOST_AUTO_TEST_SUITE(lmdb_store_suite)

// LMDB only: the directory and data.mdb are files of the LMDB backend.
BOOST_FIXTURE_TEST_CASE(directory_is_private, lmdb_fixture) {
  struct stat st;
  BOOST_REQUIRE(::stat(dir.c_str(), &st) == 0);
  BOOST_TEST((st.st_mode & 0777) == 0700u);
  BOOST_REQUIRE(::stat((dir + "/data.mdb").c_str(), &st) == 0);
  BOOST_TEST((st.st_mode & 0077) == 0u);
}

// LMDB only: the records are damaged through LMDB (lmdb_inspect).
BOOST_FIXTURE_TEST_CASE(verify_detects_inconsistency, lmdb_fixture) {
  make("s");
  append("s", msg("user", "hello there"));
  BOOST_REQUIRE(store->verify(true).ok());
  using lmdb_inspect::change;
  auto s = *store->get_session("s");
  s.message_count = 7;
  auto st = lmdb_inspect::write(
    *store, {{change::kind::put, "sessions", "s", encode_session(s)}});
  BOOST_REQUIRE(st.ok());
  auto v = store->verify();
  BOOST_TEST(!v.ok());
  BOOST_TEST(contains(v.error, "session s counts 7 messages"), v.error);
  // A dangling posting is reported too.
  std::string k = "ghostword";
  k.push_back('\0');
  codec::put_be64(k, 999);
  // One posting: delta 0, length 1 / role user, tf 1, position 0.
  std::string val{"\x00\x06\x01\x00", 4};
  st = lmdb_inspect::write(*store, {{change::kind::put, "fts_blocks", k, val}});
  BOOST_REQUIRE(st.ok());
  v = store->verify();
  BOOST_TEST(contains(v.error, "references missing message 999"), v.error);
}

// LMDB only: LMDB allows one environment per directory per process.
BOOST_FIXTURE_TEST_CASE(second_open_in_one_process_is_refused, lmdb_fixture) {
  auto r = session_store::open(options());
  BOOST_TEST(!r.ok());
  BOOST_TEST(contains(r.error, "already open in this process"), r.error);
}

// LMDB only: a directory that does not exist or is a file.
BOOST_FIXTURE_TEST_CASE(read_only_open_of_a_missing_store_fails, lmdb_fixture) {
  store.reset();
  session_store_options o;
  o.dir = tmp / "nothing-here";
  o.read_only = true;
  auto r = session_store::open(o);
  BOOST_TEST(!r.ok());
  BOOST_TEST(contains(r.error, "cannot open"), r.error);
  o.dir = tmp.write("plain-file", "x");
  o.read_only = false;
  r = session_store::open(o);
  BOOST_TEST(contains(r.error, "not a directory"), r.error);
}

// A new store records the current schema version in the transaction that
// creates its databases (issue 31, item 11): it is never taken for a store
// of before versioning and "migrated", and a reader that opens it while
// it is being created (data.mdb there, no databases yet) is told that
// there is no store (not_found), never that it is damaged.
// LMDB only: LMDB's creation transaction and a half-created environment.
BOOST_FIXTURE_TEST_CASE(a_new_store_is_created_whole_and_never_migrated,
                        lmdb_fixture) {
  store.reset();
  std::vector<std::pair<int, int>> steps;
  auto o = options();
  o.dir = tmp / "fresh";
  o.on_migrate = [&](int from, int to) { steps.emplace_back(from, to); };
  {
    auto r = session_store::open(o);
    BOOST_REQUIRE_MESSAGE(r.ok(), r.error);
    BOOST_TEST((*r)->schema_version() == lmdb_inspect::schema_version_current);
  }
  BOOST_TEST(steps.empty());
  // An environment whose creator has not committed its set-up yet.
  auto half = lmdb_inspect::create_bare_environment(tmp / "half");
  BOOST_REQUIRE_MESSAGE(half.ok(), half.error);
  o.dir = tmp / "half";
  o.read_only = true;
  auto ro = session_store::open(o);
  BOOST_TEST(!ro.ok());
  BOOST_TEST(static_cast<int>(ro.code)
             == static_cast<int>(status_code::not_found), ro.error);
  BOOST_TEST(contains(ro.error, "no session store"), ro.error);
  // Read-only in a directory that does not exist: not_found too.
  o.dir = tmp / "absent";
  ro = session_store::open(o);
  BOOST_TEST(static_cast<int>(ro.code)
             == static_cast<int>(status_code::not_found), ro.error);
}

// LMDB only: the LMDB schema's versions, set through lmdb_inspect.
BOOST_FIXTURE_TEST_CASE(schema_version_is_recorded_and_migrated, lmdb_fixture) {
  BOOST_TEST(store->schema_version() == 2);
  auto set_version = [&](const std::string& v) {
    auto st = lmdb_inspect::write(
      *store,
      {{lmdb_inspect::change::kind::put, "meta", "schema_version", v}});
    BOOST_REQUIRE(st.ok());
  };
  set_version("0");
  std::vector<std::pair<int, int>> steps;
  auto o = options(true);
  o.on_migrate = [&](int from, int to) { steps.emplace_back(from, to); };
  store.reset();
  auto ro = session_store::open(o);
  BOOST_REQUIRE(ro.ok());
  BOOST_TEST((*ro)->schema_version() == 0);
  BOOST_TEST(steps.empty());
  ro->reset();
  o.read_only = false;
  auto rw = session_store::open(o);
  BOOST_REQUIRE(rw.ok());
  BOOST_TEST((*rw)->schema_version() == 2);
  BOOST_REQUIRE(steps.size() == 2u);
  BOOST_TEST(steps[0].first == 0);
  BOOST_TEST(steps[0].second == 1);
  BOOST_TEST(steps[1].first == 1);
  BOOST_TEST(steps[1].second == 2);
  store = std::move(*rw);
  set_version("7");
  store.reset();
  auto newer = session_store::open(options());
  BOOST_TEST(!newer.ok());
  BOOST_TEST(contains(newer.error, "schema version 7 is newer"), newer.error);
}

// A store of schema version 1 kept its index in `fts_terms`, one key per
// posting. Read-only, it cannot be searched (a clear error, never wrong or
// empty results); read-write, the index is rebuilt in the block format and
// every message is found again.
// LMDB only: the LMDB index's old format.
BOOST_FIXTURE_TEST_CASE(an_old_format_index_is_rebuilt_on_read_write_open,
                        lmdb_fixture) {
  make("s");
  for (int i = 0; i < 30; ++i)
    append("s", msg(i % 2 ? "assistant" : "user",
                    "legacy message " + std::to_string(i)
                      + (i % 3 == 0 ? " zebra" : "")));
  // Turn the store into what version 1 left on disk.
  std::string k = "zebra";
  k.push_back('\0');
  codec::put_be64(k, 1);
  using lmdb_inspect::change;
  auto st = lmdb_inspect::write(
    *store, {{change::kind::drop, "fts_blocks", "", ""},
             {change::kind::drop, "fts_df", "", ""},
             {change::kind::put, "fts_terms", k,
              std::string{"\x02\x03\x01\x02", 4}},
             {change::kind::put, "meta", "schema_version", "1"}});
  BOOST_REQUIRE(st.ok());
  reopen(true);
  BOOST_TEST(store->schema_version() == 1);
  search_request q;
  q.query = "zebra";
  auto r = store->search(q);
  BOOST_TEST(!r.ok());
  BOOST_TEST(contains(r.error, "old format"), r.error);
  BOOST_TEST(store->load_messages("s")->size() == 30u);
  reopen(false);
  BOOST_TEST(store->schema_version() == 2);
  r = store->search(q);
  BOOST_REQUIRE_MESSAGE(r.ok(), r.error);
  BOOST_TEST(r->total == 10u);
  auto v = store->verify(true);
  BOOST_TEST(v.ok(), v.error);
  q.query = "legacy";
  BOOST_TEST(store->search(q)->total == 30u);
  auto legacy = lmdb_inspect::database(*store, "fts_terms");
  BOOST_REQUIRE_MESSAGE(legacy, legacy.error);
  uint64_t left = legacy->entries;
  BOOST_TEST(left == 0u);
}

// LMDB only: LMDB's map size.
BOOST_FIXTURE_TEST_CASE(the_map_grows_when_full, lmdb_fixture) {
  store.reset();
  auto o = options();
  o.map_size = 1u << 20;  // 1 MiB
  auto r = session_store::open(o);
  BOOST_REQUIRE(r.ok());
  store = std::move(*r);
  make("s");
  auto map_size = [&] {
    auto e = lmdb_inspect::environment(*store);
    BOOST_REQUIRE_MESSAGE(e, e.error);
    return e->map_size;
  };
  uint64_t before = map_size();
  std::string chunk(200 * 1024, 'a');
  for (int i = 0; i < 20; ++i)
    append("s", msg("user", chunk + std::to_string(i)));
  BOOST_TEST(map_size() > before);
  BOOST_TEST(store->load_messages("s")->size() == 20u);
  BOOST_TEST(store->verify(true).ok());
}

BOOST_AUTO_TEST_SUITE_END()
