// read_file paging through the line index (tools/line_index.hpp,
// docs/tools.md): every line of large, CRLF and small files comes back
// once, in order, over many pages; files rewritten in place, grown or
// shrunk are indexed again, never served stale; paging from threads and
// over more files than the cache holds; cancelled paging.
#define BOOST_TEST_MODULE read_file_paging
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/support/file_tool_fixture.hpp"
#include "tests/support/line_texts.hpp"

using namespace mibyan;
using mibyan::test::error_of;
using mibyan::test::lines_file;
using mibyan::test::numbered;
using mibyan::test::split_lines;
using mibyan::test::varied_text;
using mibyan::test::obj;
namespace fs = std::filesystem;

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// What read_file shows for one line of ASCII text under the default limits.
std::string shown(std::string line) {
  if (!line.empty() && line.back() == '\r')
    line.pop_back();
  if (line.size() > 2000)
    line = line.substr(0, 2000) + "... [truncated]";
  return line;
}

// Overwrites a file in place (same inode), unlike temp_dir::write.
void overwrite(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
}

struct stat stat_of(const std::string& path) {
  struct stat st {};
  ::stat(path.c_str(), &st);
  return st;
}

// Sets a file's mtime to `secs` + `nsecs` since the epoch.
void set_mtime(const std::string& path, time_t secs, long nsecs) {
  timespec times[2];
  times[0].tv_sec = 0;
  times[0].tv_nsec = UTIME_OMIT;
  times[1].tv_sec = secs;
  times[1].tv_nsec = nsecs;
  ::utimensat(AT_FDCWD, path.c_str(), times, 0);
}

// The outcome of paging through a file.
struct paged {
  std::vector<std::string> lines; // shown lines without the "N|" prefix
  int64_t total = -1;             // total_lines of the last page
  int pages = 0;
  std::string problem;            // "" when every page was well-formed
};

// Pages through `path` with `limit` lines per call, following next_offset
// until a result is not truncated, and checks that the line numbers run
// 1, 2, 3, ... without gaps. Uses no Boost.Test macros (thread-safe).
paged page_all(const mibyan::test::file_tool_fixture& f,
               const tool_context& c, const std::string& path, int limit) {
  paged out;
  int64_t offset = 1;
  for (;;) {
    auto r = f.call_with(c, "read_file",
                         obj({{"path", path}, {"offset", offset},
                              {"limit", limit}}));
    ++out.pages;
    if (!error_of(r).empty()) {
      out.problem = "offset " + std::to_string(offset) + ": " + error_of(r);
      return out;
    }
    out.total = r.get_int("total_lines", -1);
    auto content = r.get_string("content");
    int64_t expect = offset;
    size_t pos = 0;
    while (!content.empty()) {
      auto nl = content.find('\n', pos);
      auto row = content.substr(pos, nl == std::string::npos
                                         ? std::string::npos
                                         : nl - pos);
      auto bar = row.find('|');
      if (bar == std::string::npos
          || row.substr(0, bar) != std::to_string(expect)) {
        out.problem = "expected line " + std::to_string(expect) + ", got "
                      + row.substr(0, 30);
        return out;
      }
      out.lines.push_back(row.substr(bar + 1));
      ++expect;
      if (nl == std::string::npos)
        break;
      pos = nl + 1;
    }
    if (!r.get_bool("truncated", false))
      return out;
    auto next = r.get_int("next_offset", -1);
    if (next != expect || out.pages > 100000) {
      out.problem = "next_offset " + std::to_string(next) + " after line "
                    + std::to_string(expect - 1);
      return out;
    }
    offset = next;
  }
}

std::vector<std::string> expected_lines(const std::string& text) {
  std::vector<std::string> out;
  for (auto& l : split_lines(text))
    out.push_back(shown(l));
  return out;
}

// Returns "" when `got` equals `want`, else where they first differ.
std::string difference(const std::vector<std::string>& got,
                       const std::vector<std::string>& want) {
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i)
    if (got[i] != want[i])
      return "line " + std::to_string(i + 1) + ": got '"
             + got[i].substr(0, 40) + "', want '" + want[i].substr(0, 40)
             + "'";
  if (got.size() != want.size())
    return "got " + std::to_string(got.size()) + " lines, want "
           + std::to_string(want.size());
  return {};
}

// Reads `limit` lines at `offset` and returns "" when they are exactly
// `want`'s lines there (and the result's total is want.size()), else what
// differs. Thread-safe.
std::string window_problem(const mibyan::test::file_tool_fixture& f,
                           const tool_context& c, const std::string& path,
                           int64_t offset, int64_t limit,
                           const std::vector<std::string>& want) {
  auto r = f.call_with(c, "read_file",
                       obj({{"path", path}, {"offset", offset},
                            {"limit", limit}}));
  if (!error_of(r).empty())
    return "offset " + std::to_string(offset) + ": " + error_of(r);
  std::string expect;
  for (int64_t i = offset;
       i < offset + limit && i <= static_cast<int64_t>(want.size()); ++i) {
    if (!expect.empty())
      expect += '\n';
    expect += std::to_string(i) + "|" + want[static_cast<size_t>(i - 1)];
  }
  if (r.get_string("content") != expect)
    return "offset " + std::to_string(offset) + ": got '"
           + r.get_string("content").substr(0, 60) + "', want '"
           + expect.substr(0, 60) + "'";
  if (r.get_int("total_lines", -1) != static_cast<int64_t>(want.size()))
    return "offset " + std::to_string(offset) + ": total_lines "
           + std::to_string(r.get_int("total_lines", -1)) + ", want "
           + std::to_string(want.size());
  return {};
}

// A read_file context outside any session (no re-read guard).
tool_context anonymous(const tool_context& c) {
  auto out = c;
  out.session_id.clear();
  return out;
}

// Index files are cached only once they are a little older than their last
// change (see line_index_cache); tests that want a cached index wait.
void let_settle() {
  std::this_thread::sleep_for(std::chrono::milliseconds(120));
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(read_file_paging, mibyan::test::file_tool_fixture)

BOOST_AUTO_TEST_CASE(paging_through_a_large_file_returns_every_line) {
  auto text = varied_text(30000, "\n", 12345);
  auto path = put("paged.txt", text);
  auto want = expected_lines(text);
  let_settle();
  auto c = anonymous(ctx);
  // Pages of 2000 lines (mostly cut by the character budget), twice: the
  // first pass builds the index, the second uses the cached one.
  for (int pass = 0; pass < 2; ++pass) {
    auto got = page_all(*this, c, "paged.txt", 2000);
    BOOST_TEST(got.problem == "");
    BOOST_TEST(got.total == static_cast<int64_t>(want.size()));
    BOOST_TEST(difference(got.lines, want) == "");
    BOOST_TEST(got.pages > 15);
  }
  for (int limit : {777, 1023, 1025}) {
    auto got = page_all(*this, c, "paged.txt", limit);
    BOOST_TEST(got.problem == "");
    BOOST_TEST(difference(got.lines, want) == "", "limit " << limit);
  }
  // Windows on and around the places the index marks.
  int64_t total = static_cast<int64_t>(want.size());
  for (int64_t at : {int64_t{1}, int64_t{2}, int64_t{1023}, int64_t{1024},
                     int64_t{1025}, int64_t{1026}, int64_t{2048},
                     int64_t{2049}, int64_t{12344}, int64_t{12345},
                     int64_t{12346}, int64_t{29000}, total - 1, total})
    BOOST_TEST(window_problem(*this, c, "paged.txt", at, 3, want) == "");
  auto r = call_with(c, "read_file", obj({{"path", "paged.txt"},
                                          {"offset", total}}));
  BOOST_TEST(r.get_int("file_size", -1)
             == static_cast<int64_t>(text.size()));
  BOOST_TEST(r.get_bool("truncated", true) == false);
  r = call_with(c, "read_file", obj({{"path", "paged.txt"},
                                     {"offset", total + 1}}));
  BOOST_TEST(contains(error_of(r), std::to_string(total) + " lines"));
  BOOST_TEST(r.get_int("total_lines", -1) == total);
  BOOST_TEST(fs::file_size(path) == text.size());
}

BOOST_AUTO_TEST_CASE(paging_crlf_text_without_a_final_newline) {
  auto text = varied_text(20000, "\r\n") + "the last line\r";
  put("crlf_big.txt", text);
  auto want = expected_lines(text);
  BOOST_REQUIRE(want.back() == "the last line");
  let_settle();
  auto c = anonymous(ctx);
  for (int pass = 0; pass < 2; ++pass) {
    auto got = page_all(*this, c, "crlf_big.txt", 1500);
    BOOST_TEST(got.problem == "");
    BOOST_TEST(got.total == 20001);
    BOOST_TEST(difference(got.lines, want) == "");
  }
  auto r = call_with(c, "read_file", obj({{"path", "crlf_big.txt"},
                                          {"offset", 19999},
                                          {"limit", 10}}));
  BOOST_TEST(r.get_string("content")
             == "19999|row 19999" + std::string(19999 % 71, '.')
                  + "\n20000|row 20000" + std::string(20000 % 71, '.')
                  + "\n20001|the last line");
  BOOST_TEST(r.get_bool("truncated", true) == false);
  // Without any newline at all.
  put("one_line.txt", std::string(100000, 'z'));
  r = call_with(c, "read_file", obj({{"path", "one_line.txt"}}));
  BOOST_TEST(r.get_int("total_lines", -1) == 1);
  BOOST_TEST(r.get_string("content")
             == "1|" + std::string(2000, 'z') + "... [truncated]");
}

BOOST_AUTO_TEST_CASE(files_too_small_to_cache_page_the_same_way) {
  // Between the 8 KiB sniff and the 64 KiB cache threshold.
  auto text = varied_text(700);
  BOOST_REQUIRE(text.size() > 8192);
  BOOST_REQUIRE(text.size() < 65536);
  put("medium.txt", text);
  auto got = page_all(*this, anonymous(ctx), "medium.txt", 64);
  BOOST_TEST(got.problem == "");
  BOOST_TEST(difference(got.lines, expected_lines(text)) == "");
  BOOST_TEST(got.pages == 11);
}

BOOST_AUTO_TEST_CASE(same_size_rewrite_in_place_is_reindexed) {
  auto c = anonymous(ctx);
  // Version 1: 20000 lines of 10 bytes; version 2: 10000 lines of 20.
  auto v1_shaped = [](char tag) {
    std::string out;
    for (int i = 1; i <= 20000; ++i) {
      char buf[16];
      std::snprintf(buf, sizeof buf, "%c%08d\n", tag, i);
      out += buf;
    }
    return out;
  };
  auto v1 = v1_shaped('a');
  auto v2 = [](char tag) {
    std::string out;
    for (int i = 1; i <= 10000; ++i) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%c%018d\n", tag, i);
      out += buf;
    }
    return out;
  };
  auto path = put("same.txt", v1);
  set_mtime(path, 1600000000, 123456789);
  auto st1 = stat_of(path);
  let_settle();
  BOOST_TEST(window_problem(*this, c, "same.txt", 5000, 3,
                            expected_lines(v1)) == "");
  // Same size, same inode, different mtime.
  overwrite(path, v2('b'));
  set_mtime(path, 1600000001, 123456789);
  auto st2 = stat_of(path);
  BOOST_REQUIRE(st2.st_ino == st1.st_ino);
  BOOST_REQUIRE(st2.st_size == st1.st_size);
  BOOST_TEST(window_problem(*this, c, "same.txt", 5000, 3,
                            expected_lines(v2('b'))) == "");
  BOOST_TEST(window_problem(*this, c, "same.txt", 10000, 3,
                            expected_lines(v2('b'))) == "");
  auto r = call_with(c, "read_file", obj({{"path", "same.txt"},
                                          {"offset", 10001}}));
  BOOST_TEST(contains(error_of(r), "10000 lines"));
  // Same size, inode and mtime: only the ctime tells the versions apart
  // (and the lines are laid out differently again).
  let_settle();
  BOOST_TEST(window_problem(*this, c, "same.txt", 7000, 2,
                            expected_lines(v2('b'))) == "");
  overwrite(path, v1_shaped('c'));
  set_mtime(path, 1600000001, 123456789);
  auto st3 = stat_of(path);
  BOOST_REQUIRE(st3.st_ino == st1.st_ino);
  BOOST_REQUIRE(st3.st_size == st1.st_size);
  BOOST_REQUIRE(st3.st_mtim.tv_sec == st2.st_mtim.tv_sec);
  BOOST_TEST(window_problem(*this, c, "same.txt", 7000, 2,
                            expected_lines(v1_shaped('c'))) == "");
  BOOST_TEST(window_problem(*this, c, "same.txt", 19000, 2,
                            expected_lines(v1_shaped('c'))) == "");
}

BOOST_AUTO_TEST_CASE(rapid_same_size_rewrites_are_never_served_stale) {
  // Rewrites that may fall in the same file-system timestamp tick as the
  // read before them: the version cannot tell them apart, so an index built
  // that soon after a change must not be reused.
  auto c = anonymous(ctx);
  std::string shapes[2];
  for (int i = 1; i <= 12000; ++i)
    shapes[0] += "s" + std::string(8, '0' + i % 10) + "\n";
  for (int i = 1; i <= 6000; ++i)
    shapes[1] += "T" + std::string(18, '0' + i % 10) + "\n";
  BOOST_REQUIRE(shapes[0].size() == shapes[1].size());
  auto path = put("rapid.txt", shapes[0]);
  int good = 0;
  for (int round = 0; round < 40; ++round) {
    auto& text = shapes[round % 2];
    overwrite(path, text);
    auto want = expected_lines(text);
    if (window_problem(*this, c, "rapid.txt", 5000, 2, want).empty()
        && window_problem(*this, c, "rapid.txt", 5990, 2, want).empty())
      ++good;
  }
  BOOST_TEST(good == 40);
}

BOOST_AUTO_TEST_CASE(growing_and_shrinking_files_are_reindexed) {
  auto c = anonymous(ctx);
  auto text = lines_file(10000);
  auto path = put("grow.txt", text);
  let_settle();
  BOOST_TEST(window_problem(*this, c, "grow.txt", 9999, 5,
                            expected_lines(text)) == "");
  {
    std::ofstream out(path, std::ios::binary | std::ios::app);
    for (int i = 10001; i <= 15000; ++i)
      out << "line" << i << "\n";
  }
  text = lines_file(15000);
  BOOST_TEST(window_problem(*this, c, "grow.txt", 9999, 5,
                            expected_lines(text)) == "");
  BOOST_TEST(window_problem(*this, c, "grow.txt", 14999, 5,
                            expected_lines(text)) == "");
  let_settle();
  BOOST_TEST(window_problem(*this, c, "grow.txt", 12000, 5,
                            expected_lines(text)) == "");
  // Shrink in place, then again to a last line without newline.
  text = lines_file(3000);
  overwrite(path, text);
  auto r = call_with(c, "read_file", obj({{"path", "grow.txt"},
                                          {"offset", 5000}}));
  BOOST_TEST(contains(error_of(r), "3000 lines"));
  BOOST_TEST(window_problem(*this, c, "grow.txt", 2999, 5,
                            expected_lines(text)) == "");
  text = lines_file(9000) + "tail";
  overwrite(path, text);
  BOOST_TEST(window_problem(*this, c, "grow.txt", 9000, 5,
                            expected_lines(text)) == "");
  // Replaced by another file (new inode) of the same size.
  auto other = lines_file(9000) + "TAIL";
  dir.write("other.txt", other);
  BOOST_REQUIRE(::rename((dir / "other.txt").c_str(), path.c_str()) == 0);
  BOOST_TEST(window_problem(*this, c, "grow.txt", 9000, 5,
                            expected_lines(other)) == "");
}

BOOST_AUTO_TEST_CASE(concurrent_paging_of_different_files) {
  constexpr int files = 5;
  std::vector<std::vector<std::string>> want(files);
  for (int f = 0; f < files; ++f) {
    auto text = varied_text(8000 + 3000 * f, f % 2 ? "\r\n" : "\n",
                            f == 3 ? 5000 : 0);
    text += "file " + std::to_string(f) + " end";
    put("conc" + std::to_string(f) + ".txt", text);
    want[f] = expected_lines(text);
  }
  let_settle();
  std::vector<std::thread> threads;
  std::mutex mtx;
  std::vector<std::string> problems;
  std::atomic<int> checked{0};
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      auto c = anonymous(ctx);
      auto report = [&](const std::string& p) {
        if (p.empty())
          return;
        std::lock_guard<std::mutex> guard{mtx};
        problems.push_back("thread " + std::to_string(t) + ": " + p);
      };
      for (int round = 0; round < 3; ++round) {
        int f = (t + round) % files;
        auto name = "conc" + std::to_string(f) + ".txt";
        if (t % 2 == 0) {
          auto got = page_all(*this, c, name, 400 + 137 * t);
          report(got.problem);
          report(difference(got.lines, want[f]));
        } else {
          auto n = static_cast<int64_t>(want[f].size());
          for (int64_t at = 1 + t * 31; at <= n; at += 1777 + t)
            report(window_problem(*this, c, name, at, 7, want[f]));
          report(window_problem(*this, c, name, n, 7, want[f]));
        }
        ++checked;
      }
    });
  for (auto& th : threads)
    th.join();
  BOOST_TEST(checked.load() == 24);
  BOOST_TEST(problems.empty());
  for (size_t i = 0; i < std::min<size_t>(problems.size(), 5); ++i)
    BOOST_TEST_MESSAGE(problems[i]);
}

BOOST_AUTO_TEST_CASE(more_files_than_the_cache_holds) {
  auto c = anonymous(ctx);
  constexpr int files = 70;
  for (int f = 0; f < files; ++f)
    put("many" + std::to_string(f) + ".txt",
        lines_file(9000, "f" + std::to_string(f) + "-"));
  let_settle();
  int good = 0;
  for (int round = 0; round < 2; ++round)
    for (int i = 0; i < files; ++i) {
      int f = round == 0 ? i : files - 1 - i;
      auto r = call_with(c, "read_file",
                         obj({{"path", "many" + std::to_string(f) + ".txt"},
                              {"offset", 8000 + f},
                              {"limit", 2}}));
      auto p = "f" + std::to_string(f) + "-";
      if (r.get_string("content")
            == numbered(8000 + f, 8001 + f, p)
          && r.get_int("total_lines", -1) == 9000)
        ++good;
    }
  BOOST_TEST(good == 2 * files);
}

BOOST_AUTO_TEST_CASE(cancelled_paging_of_an_indexed_file) {
  put("idx.txt", lines_file(20000));
  let_settle();
  auto c = anonymous(ctx);
  auto r = call_with(c, "read_file", obj({{"path", "idx.txt"},
                                          {"offset", 15000}}));
  BOOST_TEST(error_of(r) == "");
  cancelled = true;
  r = call_with(c, "read_file", obj({{"path", "idx.txt"},
                                     {"offset", 17000}}));
  BOOST_TEST(contains(error_of(r), "cancelled"));
  cancelled = false;
  c.deadline = std::chrono::steady_clock::now() - std::chrono::seconds(1);
  r = call_with(c, "read_file", obj({{"path", "idx.txt"},
                                     {"offset", 17000}}));
  BOOST_TEST(contains(error_of(r), "cancelled"));
}

BOOST_AUTO_TEST_CASE(a_cached_index_keeps_the_image_and_binary_checks) {
  // Later pages of an indexed file skip the sniff of its first bytes; a
  // link with an image name, and a rewrite to binary, are still refused.
  auto text = varied_text(20000);
  auto path = put("indexed.txt", text);
  let_settle();
  auto c = anonymous(ctx);
  auto r = call_with(c, "read_file", obj({{"path", "indexed.txt"},
                                          {"offset", 5000}, {"limit", 2}}));
  BOOST_TEST(error_of(r) == "");
  r = call_with(c, "read_file", obj({{"path", "indexed.txt"},
                                     {"offset", 5002}, {"limit", 2}}));
  BOOST_TEST(error_of(r) == "");
  BOOST_TEST(r.get_string("content").rfind("5002|", 0) == 0);
  fs::create_hard_link(path, fs::path{path}.parent_path() / "indexed.png");
  r = call_with(c, "read_file", obj({{"path", "indexed.png"},
                                     {"offset", 5000}, {"limit", 2}}));
  BOOST_TEST(r.get_bool("is_image", false) == true);
  auto binary = text;
  binary[10] = '\0';
  put("indexed.txt", binary);
  let_settle();
  r = call_with(c, "read_file", obj({{"path", "indexed.txt"},
                                     {"offset", 5000}, {"limit", 2}}));
  BOOST_TEST(r.get_bool("is_binary", false) == true);
}

BOOST_AUTO_TEST_CASE(a_page_after_the_last_one_starts_where_it_ended) {
  // Sequential pages resume at the previous page's end (not at the nearest
  // indexed line); reads elsewhere, and after a change, are unaffected.
  auto text = varied_text(30000, "\n", 777);
  put("marks.txt", text);
  auto want = expected_lines(text);
  let_settle();
  auto c = anonymous(ctx);
  auto page = [&](int64_t offset, int64_t limit) {
    return call_with(c, "read_file", obj({{"path", "marks.txt"},
                                          {"offset", offset},
                                          {"limit", limit}}));
  };
  auto r = page(1500, 700);
  BOOST_TEST(r.get_int("next_offset", 0) == 2200);
  for (int64_t at : {int64_t{2200}, int64_t{2900}, int64_t{2901},
                     int64_t{2200}, int64_t{100}, int64_t{3600}})
    BOOST_TEST(window_problem(*this, c, "marks.txt", at, 700, want) == "",
               "offset " << at);
  // A changed file (same length, other bytes) is read afresh.
  auto changed = text;
  std::replace(changed.begin(), changed.end(), 'a', 'b');
  put("marks.txt", changed);
  let_settle();
  auto want2 = expected_lines(changed);
  for (int64_t at : {int64_t{1500}, int64_t{2200}})
    BOOST_TEST(window_problem(*this, c, "marks.txt", at, 700, want2) == "",
               "offset " << at << " after the change");
}

BOOST_AUTO_TEST_SUITE_END()
