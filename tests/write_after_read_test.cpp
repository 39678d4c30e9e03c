#define BOOST_TEST_MODULE write_after_read
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <fstream>
#include <thread>

#include <fcntl.h>
#include <sys/stat.h>
#include <utime.h>

#include "tests/support/file_tool_fixture.hpp"
#include "tools/line_index.hpp"

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

// A file over read_file's 8 KiB sniff goes through the line index, whose
// single pass also hashes it (tools/line_index.hpp): read_file records the
// version it read without reading the file a second time, and the check
// behaves as for a small file (twice in a row: a touched file reads again).
BOOST_FIXTURE_TEST_CASE(indexed_files_are_checked_like_small_ones, fixture) {
  std::string big;
  for (int i = 0; i < 20000; ++i)
    big += "line " + std::to_string(i) + " of a larger file\n";
  put(big);
  struct stat st;
  for (int pass = 0; pass < 2; ++pass) {
    BOOST_TEST(read().find("content") != nullptr);
    ::stat(file.c_str(), &st);
    struct timespec touched[2] = {st.st_atim, st.st_mtim};
    touched[1].tv_sec += 5;
    ::utimensat(AT_FDCWD, file.c_str(), touched, 0);
    // Touched with identical content: no warning.
    auto r = write(big);
    BOOST_TEST(!warned(r), r.dump());
  }
  // The same size, one byte different: a warning.
  read();
  auto changed = big;
  changed[changed.size() / 2] = changed[changed.size() / 2] == 'x' ? 'y' : 'x';
  change_externally(changed);
  BOOST_TEST(warned(write(big)));
}

BOOST_AUTO_TEST_CASE(content_hash_does_not_depend_on_how_bytes_arrive) {
  std::string text;
  for (int i = 0; i < 1000; ++i)
    text += static_cast<char>('a' + (i * 7) % 26);
  content_hasher whole;
  whole.update(text.data(), text.size());
  for (size_t step : {1u, 3u, 7u, 8u, 9u, 64u, 999u}) {
    content_hasher parts;
    for (size_t i = 0; i < text.size(); i += step)
      parts.update(text.data() + i, std::min(step, text.size() - i));
    BOOST_TEST(parts.value() == whole.value(), "step " << step);
  }
  // Different bytes, or the same bytes plus a zero, hash differently.
  content_hasher other;
  auto changed = text;
  changed[500] = '#';
  other.update(changed.data(), changed.size());
  BOOST_TEST(other.value() != whole.value());
  content_hasher longer;
  longer.update(text.data(), text.size());
  longer.update("\0", 1);
  BOOST_TEST(longer.value() != whole.value());
}
