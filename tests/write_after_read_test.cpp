#define BOOST_TEST_MODULE write_after_read
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <fstream>
#include <thread>

#include <fcntl.h>
#include <sys/stat.h>
#include <utime.h>

#include "tests/support/file_tool_fixture.hpp"

using namespace mibyan;

namespace {

struct fixture : test::file_tool_fixture {
  std::string file;

  fixture() {
    file = work + "/notes.txt";
    put("one\ntwo\nthree\n");
  }

  void put(const std::string& text) const {
    std::ofstream out{file, std::ios::binary | std::ios::trunc};
    out << text;
  }

  // Changes the file behind the model's back, with a distinct mtime even on
  // coarse-grained file systems.
  void change_externally(const std::string& text) const {
    struct stat st;
    ::stat(file.c_str(), &st);
    put(text);
    struct timespec ts[2] = {st.st_atim, st.st_mtim};
    ts[1].tv_sec += 2;
    ::utimensat(AT_FDCWD, file.c_str(), ts, 0);
  }

  json::value read() const {
    json::value a;
    a["path"] = file;
    return call("read_file", a);
  }

  json::value write(const std::string& text) const {
    json::value a;
    a["path"] = file;
    a["content"] = text;
    return call("write_file", a);
  }

  json::value patch(const std::string& from, const std::string& to) const {
    json::value a;
    a["path"] = file;
    a["old_string"] = from;
    a["new_string"] = to;
    return call("patch", a);
  }

  static bool warned(const json::value& r) {
    return r.find("_warning") != nullptr;
  }
};

} // namespace

BOOST_FIXTURE_TEST_CASE(write_after_external_change_warns, fixture) {
  BOOST_TEST(read().find("content") != nullptr);
  change_externally("someone else's text\n");
  auto r = write("mine\n");
  BOOST_TEST(r.find("error") == nullptr, r.dump());
  BOOST_REQUIRE(warned(r));
  BOOST_TEST(r.get_string("_warning").find("changed on disk since you last read it")
             != std::string::npos);
  BOOST_TEST(test::slurp(file) == "mine\n"); // the write still happened
  // The model now knows its own version: the next write is clean.
  BOOST_TEST(!warned(write("mine again\n")));
}

BOOST_FIXTURE_TEST_CASE(unchanged_or_unread_files_do_not_warn, fixture) {
  // Never read in this session: no baseline, no warning.
  BOOST_TEST(!warned(write("first\n")));
  read();
  BOOST_TEST(!warned(write("second\n")));
  read();
  // Touched with identical content: the hash says unchanged.
  struct stat st;
  ::stat(file.c_str(), &st);
  struct timespec ts[2] = {st.st_atim, st.st_mtim};
  ts[1].tv_sec += 5;
  ::utimensat(AT_FDCWD, file.c_str(), ts, 0);
  BOOST_TEST(!warned(write("third\n")));
}

BOOST_FIXTURE_TEST_CASE(sessions_are_separate, fixture) {
  read();
  change_externally("changed\n");
  ctx.session_id = "session-2";
  BOOST_TEST(!warned(write("other session\n")));
  ctx.session_id = "session-1";
  BOOST_TEST(warned(write("back in session 1\n")));
}

BOOST_FIXTURE_TEST_CASE(patch_after_external_change_warns, fixture) {
  read();
  change_externally("one\ntwo\nthree\nfour (added by someone)\n");
  auto r = patch("two", "TWO");
  BOOST_TEST(r["success"].as_bool(), r.dump());
  BOOST_TEST(warned(r));
  BOOST_TEST(test::slurp(file) == "one\nTWO\nthree\nfour (added by someone)\n");
  // Its own patch is known: a second patch is clean.
  auto again = patch("three", "THREE");
  BOOST_TEST(again["success"].as_bool());
  BOOST_TEST(!warned(again));
}

BOOST_FIXTURE_TEST_CASE(v4a_patch_after_external_change_warns, fixture) {
  read();
  change_externally("one\ntwo\nthree\nextra\n");
  json::value a;
  a["mode"] = "patch";
  a["patch"] = "*** Begin Patch\n*** Update File: " + file
               + "\n@@\n one\n-two\n+2\n three\n*** End Patch\n";
  auto r = call("patch", a);
  BOOST_TEST(r["success"].as_bool(), r.dump());
  BOOST_TEST(warned(r));
}

BOOST_FIXTURE_TEST_CASE(deleted_file_warns, fixture) {
  read();
  ::unlink(file.c_str());
  auto r = write("recreated\n");
  BOOST_TEST(warned(r));
  BOOST_TEST(r.get_string("_warning").find("deleted") != std::string::npos);
}
