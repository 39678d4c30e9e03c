#define BOOST_TEST_MODULE sessions_cli
#include <boost/test/unit_test.hpp>

#include "base/json.hpp"
#include "storage/session_store.hpp"
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mibyan;

namespace {

struct fixture {
  test::temp_dir home;
  test::process_options po;
  std::string first_id;

  fixture() {
    po.env["MIBYAN_HOME"] = home.path();
    session_store_options so;
    so.dir = session_store::default_dir(home.path());
    auto store = session_store::open(so);
    BOOST_REQUIRE_MESSAGE(store, store.error);
    new_session a;
    a.title = "first talk";
    a.model = "m1";
    auto s1 = (*store)->create_session(a);
    BOOST_REQUIRE(s1);
    first_id = s1->id;
    chat_message u{"user", "how do lighthouses work", {}, "", "", "", "", 0};
    chat_message r{"assistant", "a lamp and a lens", {}, "", "", "", "stop",
                   0};
    BOOST_REQUIRE((*store)->append_message(first_id, u));
    BOOST_REQUIRE((*store)->append_message(first_id, r));
    new_session b;
    b.id = "second";
    BOOST_REQUIRE((*store)->create_session(b));
    chat_message u2{"user", "lighthouse keepers and lamps", {}, "", "", "",
                    "", 0};
    BOOST_REQUIRE((*store)->append_message("second", u2));
  }

  json::value run_json(const std::vector<std::string>& args) {
    auto r = test::run_mibyan(args, po);
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    auto parsed = json::parse(r.out);
    BOOST_REQUIRE_MESSAGE(parsed, r.out);
    return *parsed.v;
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(sessions_cli, fixture)

BOOST_AUTO_TEST_CASE(list_show_search_delete) {
  auto list = run_json({"sessions", "list", "--json"});
  BOOST_TEST(list.size() == 2u);
  auto show = run_json({"sessions", "show", first_id, "--json"});
  BOOST_TEST(show.get_string("title") == "first talk");
  BOOST_TEST(show["messages"].size() == 2u);
  BOOST_TEST(show["messages"].as_array()[1].get_string("content")
             == "a lamp and a lens");
  auto found = run_json({"sessions", "search", "and", "--json"});
  BOOST_TEST(found.get_int("total", 0) == 2);
  auto filtered = run_json({"sessions", "search", "and", "--role",
                            "assistant", "--json"});
  BOOST_TEST(filtered.get_int("total", 0) == 1);
  auto phrase = run_json({"sessions", "search", "\"lighthouse keepers\"",
                          "--json"});
  BOOST_TEST(phrase.get_int("total", 0) == 1);
  BOOST_TEST(phrase["hits"].as_array()[0].get_string("session_id")
             == "second");
  auto del = test::run_mibyan({"sessions", "delete", "second"}, po);
  BOOST_TEST(del.exit_code == 0);
  BOOST_TEST(run_json({"sessions", "list", "--json"}).size() == 1u);
  BOOST_TEST(run_json({"sessions", "search", "keepers", "--json"})
               .get_int("total", -1) == 0);
  auto text = test::run_mibyan({"sessions", "list"}, po);
  BOOST_TEST(text.out.find("first talk") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(bad_input_gets_clear_errors) {
  auto missing = test::run_mibyan({"sessions", "show", "nope"}, po);
  BOOST_TEST(missing.exit_code == 1);
  BOOST_TEST(missing.err.find("nope") != std::string::npos);
  auto usage = test::run_mibyan({"sessions"}, po);
  BOOST_TEST(usage.exit_code == 2);
  auto bad_limit = test::run_mibyan({"sessions", "list", "--limit", "x"}, po);
  BOOST_TEST(bad_limit.exit_code == 2);
  auto del = test::run_mibyan({"sessions", "delete", "nope"}, po);
  BOOST_TEST(del.exit_code == 1);
  // Nothing was lost.
  BOOST_TEST(run_json({"sessions", "list", "--json"}).size() == 2u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_CASE(empty_home_lists_nothing) {
  test::temp_dir home;
  test::process_options po;
  po.env["MIBYAN_HOME"] = home.path();
  auto r = test::run_mibyan({"sessions", "list"}, po);
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(r.out == "no sessions yet\n");
}

// Readers of a home without a store (none yet, or one another process is
// creating) see no sessions and succeed (issue 31, item 11).
BOOST_AUTO_TEST_CASE(empty_home_searches_nothing) {
  test::temp_dir home;
  test::process_options po;
  po.env["MIBYAN_HOME"] = home.path();
  auto r = test::run_mibyan({"sessions", "search", "lamp"}, po);
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(r.out == "0 matches\n");
  r = test::run_mibyan({"sessions", "search", "lamp", "--json"}, po);
  BOOST_TEST(r.exit_code == 0, r.err);
  auto parsed = json::parse(r.out);
  BOOST_REQUIRE_MESSAGE(parsed, r.out);
  BOOST_TEST((*parsed.v)["total"].as_int() == 0);
  r = test::run_mibyan({"sessions", "list", "--json"}, po);
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(r.out == "[]\n");
}
