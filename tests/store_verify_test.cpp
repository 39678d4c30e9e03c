// A damaged store is reported clearly on open, never read as empty, never
// hangs or crashes (issue 14: zeroed, truncated, FIFO, garbage data.mdb).
#define BOOST_TEST_MODULE store_verify
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include <sys/stat.h>
#include <unistd.h>

#include "storage/session_store.hpp"
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mibyan;
namespace fs = std::filesystem;

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

struct fixture {
  test::temp_dir home;
  std::string dir = session_store::default_dir(home.path());
  std::string data = dir + "/data.mdb";
  test::process_options po;

  fixture() {
    po.env["MIBYAN_HOME"] = home.path();
    session_store_options so;
    so.dir = dir;
    auto store = session_store::open(so);
    BOOST_REQUIRE_MESSAGE(store, store.error);
    for (int s = 0; s < 5; ++s) {
      new_session ns;
      ns.id = "s" + std::to_string(s);
      BOOST_REQUIRE((*store)->create_session(ns));
      for (int i = 0; i < 20; ++i) {
        chat_message m{"user", std::string(3000, 'a' + i % 26), {}, "", "",
                       "", "", 0};
        BOOST_REQUIRE((*store)->append_message(ns.id, m));
      }
    }
  }

  // `sessions list` (with a time bound: a FIFO used to hang it) must fail
  // with a message naming data.mdb, and never claim there are no sessions.
  void expect_reported(const std::string& why) {
    test::process_options o = po;
    // A bound, not a measurement: a FIFO once hung the command. An ASan
    // build on a busy machine needs seconds just to start and to exit.
    o.timeout_seconds = 90;
    auto r = test::run_mibyan({"sessions", "list"}, o);
    BOOST_CHECK_MESSAGE(r.exit_code == 1, why << ": exit " << r.exit_code);
    BOOST_CHECK_MESSAGE(contains(r.err, "data.mdb"), why << ": " << r.err);
    BOOST_CHECK_MESSAGE(!contains(r.out, "no sessions yet"), why);
    BOOST_TEST_MESSAGE(why << ": " << r.err);
    session_store_options so;
    so.dir = dir;
    so.read_only = true;
    auto store = session_store::open(so);
    BOOST_CHECK_MESSAGE(!store, why << ": opened anyway");
    BOOST_CHECK_MESSAGE(contains(store.error, "damaged"), store.error);
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(store_verify, fixture)

BOOST_AUTO_TEST_CASE(a_sound_store_opens) {
  auto r = test::run_mibyan({"sessions", "list"}, po);
  BOOST_CHECK_EQUAL(r.exit_code, 0);
  BOOST_CHECK(contains(r.out, "s4"));
}

BOOST_AUTO_TEST_CASE(zeroed) {
  auto size = fs::file_size(data);
  std::ofstream{data, std::ios::trunc} << std::string(size, '\0');
  expect_reported("zeroed");
}

BOOST_AUTO_TEST_CASE(truncated_to_half) {
  fs::resize_file(data, fs::file_size(data) / 2);
  expect_reported("truncated");
}

BOOST_AUTO_TEST_CASE(a_fifo_in_its_place) {
  fs::remove(data);
  BOOST_REQUIRE(::mkfifo(data.c_str(), 0600) == 0);
  expect_reported("fifo");
}

BOOST_AUTO_TEST_CASE(garbage) {
  std::ofstream out{data, std::ios::trunc | std::ios::binary};
  for (int i = 0; i < 20000; ++i)
    out << "garbage-" << i;
  out.close();
  expect_reported("garbage");
}

BOOST_AUTO_TEST_CASE(a_missing_store_still_means_no_sessions) {
  fs::remove_all(dir);
  auto r = test::run_mibyan({"sessions", "list"}, po);
  BOOST_CHECK_EQUAL(r.exit_code, 0);
  BOOST_CHECK(contains(r.out, "no sessions yet"));
}

BOOST_AUTO_TEST_SUITE_END()
