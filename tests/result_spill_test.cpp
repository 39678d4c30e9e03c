// Oversized tool results are kept privately under
// $MIBYAN_HOME/cache/results/<session>/ (issue 14, item 1).
#define BOOST_TEST_MODULE result_spill
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

#include "storage/result_spill.hpp"
#include "storage/session_store.hpp"
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mibyan;
namespace fs = std::filesystem;

namespace {

unsigned mode_of(const std::string& path) {
  struct stat st;
  BOOST_REQUIRE(::lstat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

} // namespace

BOOST_AUTO_TEST_CASE(files_are_private_and_under_the_home) {
  test::temp_dir home;
  auto saved = spill_result(home.path(), "s1", "call_1", "payload");
  BOOST_REQUIRE_MESSAGE(saved, saved.error);
  BOOST_CHECK(starts_with(*saved, home.path() + "/cache/results/s1/"));
  BOOST_CHECK_EQUAL(test::slurp(*saved), "payload");
  BOOST_CHECK_EQUAL(mode_of(*saved), 0600u);
  BOOST_CHECK_EQUAL(mode_of(home.path() + "/cache"), 0700u);
  BOOST_CHECK_EQUAL(mode_of(home.path() + "/cache/results"), 0700u);
  BOOST_CHECK_EQUAL(mode_of(home.path() + "/cache/results/s1"), 0700u);
  // The name is not predictable from the call id alone.
  BOOST_CHECK(fs::path(*saved).filename() != "call_1.txt");
}

BOOST_AUTO_TEST_CASE(planted_symlinks_are_never_followed) {
  test::temp_dir home;
  test::temp_dir elsewhere;
  auto victim = elsewhere.write("victim.txt", "precious");
  // A link at the session directory itself is refused.
  fs::create_directories(home.path() + "/cache/results");
  fs::create_directory_symlink(elsewhere.path(),
                               home.path() + "/cache/results/s1");
  auto saved = spill_result(home.path(), "s1", "call_1", "attack");
  BOOST_CHECK(!saved);
  BOOST_CHECK(fs::directory_iterator(elsewhere.path())->path().filename()
              == "victim.txt");
  // Links at every predictable file name inside a real directory are left
  // alone: the result goes to a fresh file.
  fs::remove(home.path() + "/cache/results/s1");
  fs::create_directory(home.path() + "/cache/results/s1");
  for (auto name : {"call_1.txt", "call_1", "result.txt"})
    fs::create_symlink(victim, home.path() + "/cache/results/s1/" + name);
  saved = spill_result(home.path(), "s1", "call_1", "attack");
  BOOST_REQUIRE_MESSAGE(saved, saved.error);
  BOOST_CHECK_EQUAL(test::slurp(victim), "precious");
  BOOST_CHECK_EQUAL(test::slurp(*saved), "attack");
  // A session id cannot climb out of the root.
  auto escaped = spill_result(home.path(), "../../x", "c", "t");
  BOOST_REQUIRE_MESSAGE(escaped, escaped.error);
  BOOST_CHECK(starts_with(*escaped, home.path() + "/cache/results/"));
  BOOST_CHECK(fs::path(*escaped).parent_path().parent_path()
              == fs::path(home.path() + "/cache/results"));
}

BOOST_AUTO_TEST_CASE(a_group_writable_cache_dir_is_tightened) {
  test::temp_dir home;
  fs::create_directories(home.path() + "/cache");
  ::chmod((home.path() + "/cache").c_str(), 0777);
  auto saved = spill_result(home.path(), "s1", "c", "t");
  BOOST_REQUIRE_MESSAGE(saved, saved.error);
  BOOST_CHECK_EQUAL(mode_of(home.path() + "/cache"), 0700u);
}

BOOST_AUTO_TEST_CASE(concurrent_sessions_never_collide) {
  test::temp_dir home;
  // Same call ids in two sessions, written concurrently.
  std::vector<std::string> paths(2 * 50);
  std::vector<std::thread> threads;
  for (int s = 0; s < 2; ++s)
    threads.emplace_back([&, s] {
      for (int i = 0; i < 50; ++i) {
        auto text = "session " + std::to_string(s) + " call "
                    + std::to_string(i);
        auto r = spill_result(home.path(), "sess" + std::to_string(s),
                              "call_" + std::to_string(i), text);
        paths[s * 50 + i] = r ? *r : std::string{};
      }
    });
  for (auto& t : threads)
    t.join();
  std::set<std::string> unique;
  for (int s = 0; s < 2; ++s)
    for (int i = 0; i < 50; ++i) {
      auto& p = paths[s * 50 + i];
      BOOST_REQUIRE(!p.empty());
      unique.insert(p);
      BOOST_CHECK_EQUAL(test::slurp(p), "session " + std::to_string(s)
                                          + " call " + std::to_string(i));
    }
  BOOST_CHECK_EQUAL(unique.size(), 100u);
  // The same call id twice in one session: two files.
  auto a = spill_result(home.path(), "sess0", "dup", "first");
  auto b = spill_result(home.path(), "sess0", "dup", "second");
  BOOST_REQUIRE(a && b);
  BOOST_CHECK(*a != *b);
  BOOST_CHECK_EQUAL(test::slurp(*a), "first");
}

BOOST_AUTO_TEST_CASE(sessions_delete_removes_the_results) {
  test::temp_dir home;
  {
    session_store_options so;
    so.dir = session_store::default_dir(home.path());
    auto store = session_store::open(so);
    BOOST_REQUIRE_MESSAGE(store, store.error);
    new_session a;
    a.id = "gone";
    BOOST_REQUIRE((*store)->create_session(a));
    new_session b;
    b.id = "kept";
    BOOST_REQUIRE((*store)->create_session(b));
  }
  auto g = spill_result(home.path(), "gone", "c1", "x");
  auto k = spill_result(home.path(), "kept", "c1", "y");
  BOOST_REQUIRE(g && k);
  test::process_options po;
  po.env["MIBYAN_HOME"] = home.path();
  auto r = test::run_mibyan({"sessions", "delete", "gone"}, po);
  BOOST_CHECK_MESSAGE(r.exit_code == 0, r.err);
  BOOST_CHECK(!fs::exists(spill_dir(home.path(), "gone")));
  BOOST_CHECK(fs::exists(*k));
}
