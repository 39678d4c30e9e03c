#define BOOST_TEST_MODULE read_file
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
#include "tools/line_index.hpp"

using namespace mibyan;
using mibyan::test::error_of;
using mibyan::test::obj;
namespace fs = std::filesystem;

namespace {

std::string numbered(int from, int to, const std::string& prefix = "line") {
  std::string out;
  for (int i = from; i <= to; ++i) {
    if (!out.empty())
      out += '\n';
    out += std::to_string(i) + "|" + prefix + std::to_string(i);
  }
  return out;
}

std::string lines_file(int n, const std::string& prefix = "line") {
  std::string out;
  for (int i = 1; i <= n; ++i)
    out += prefix + std::to_string(i) + "\n";
  return out;
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Splits a text into lines the way read_file counts them: every '\n' ends
// a line, bytes after the last '\n' form one more line.
std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < text.size()) {
    auto nl = text.find('\n', pos);
    if (nl == std::string::npos) {
      out.push_back(text.substr(pos));
      break;
    }
    out.push_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return out;
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

// A text of `n` lines of varied lengths: empty lines, short and medium
// ones, every 997th line 2,500 characters long, and one 1.5 MB line at
// `huge_at` (0: none).
std::string varied_text(int n, const std::string& eol = "\n",
                        int huge_at = 0) {
  std::string out;
  for (int i = 1; i <= n; ++i) {
    if (i == huge_at)
      out += std::string(1500000, 'h');
    else if (i % 997 == 0)
      out += "L" + std::to_string(i) + std::string(2500, 'w');
    else if (i % 13 != 0)
      out += "row " + std::to_string(i) + std::string(i % 71, '.');
    out += eol;
  }
  return out;
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

BOOST_FIXTURE_TEST_SUITE(read_file, mibyan::test::file_tool_fixture)

// -- normal use ---------------------------------------------------------------

BOOST_AUTO_TEST_CASE(reads_a_small_file_as_numbered_lines) {
  put("a.txt", "alpha\nbeta\ngamma\n");
  auto r = call("read_file", R"({"path":"a.txt"})");
  BOOST_TEST(error_of(r) == "");
  BOOST_TEST(r.get_string("content") == "1|alpha\n2|beta\n3|gamma");
  BOOST_TEST(r.get_int("total_lines", -1) == 3);
  BOOST_TEST(r.get_int("file_size", -1) == 17);
  BOOST_TEST(r.get_bool("truncated", true) == false);
  BOOST_TEST(r.find("next_offset") == nullptr);
  BOOST_TEST(r.find("hint") == nullptr);
}

BOOST_AUTO_TEST_CASE(counts_a_last_line_without_newline) {
  put("b.txt", "one\ntwo");
  auto r = call("read_file", R"({"path":"b.txt"})");
  BOOST_TEST(r.get_string("content") == "1|one\n2|two");
  BOOST_TEST(r.get_int("total_lines", -1) == 2);
}

BOOST_AUTO_TEST_CASE(absolute_path_and_tilde_expand) {
  auto abs = put("abs.txt", "x\n");
  auto r = call("read_file", obj({{"path", abs}}));
  BOOST_TEST(r.get_string("content") == "1|x");
  dir.write("home/notes.txt", "from home\n");
  r = call("read_file", R"({"path":"~/notes.txt"})");
  BOOST_TEST(r.get_string("content") == "1|from home");
}

BOOST_AUTO_TEST_CASE(offset_and_limit_select_a_window_with_a_hint) {
  put("ten.txt", lines_file(10));
  auto r = call("read_file", R"({"path":"ten.txt","offset":3,"limit":4})");
  BOOST_TEST(r.get_string("content") == numbered(3, 6));
  BOOST_TEST(r.get_bool("truncated", false) == true);
  BOOST_TEST(r.get_int("next_offset", -1) == 7);
  BOOST_TEST(r.get_string("hint")
             == "Use offset=7 to continue reading (showing 3-6 of 10 lines)");
  BOOST_TEST(r.find("truncated_by") == nullptr);
  // The last window is not truncated.
  r = call("read_file", R"({"path":"ten.txt","offset":7,"limit":4})");
  BOOST_TEST(r.get_string("content") == numbered(7, 10));
  BOOST_TEST(r.get_bool("truncated", true) == false);
}

BOOST_AUTO_TEST_CASE(default_limit_is_500_lines) {
  put("many.txt", lines_file(600));
  auto r = call("read_file", R"({"path":"many.txt"})");
  BOOST_TEST(r.get_string("content") == numbered(1, 500));
  BOOST_TEST(r.get_int("next_offset", -1) == 501);
  BOOST_TEST(r.get_int("total_lines", -1) == 600);
}

BOOST_AUTO_TEST_CASE(limit_is_clamped_to_configured_range) {
  put("many.txt", lines_file(50));
  cfg.tool_output.max_lines = 10;
  auto r = call("read_file", R"({"path":"many.txt","limit":5000})");
  BOOST_TEST(r.get_string("content") == numbered(1, 10));
  r = call("read_file", R"({"path":"many.txt","limit":0,"offset":2})");
  BOOST_TEST(r.get_string("content") == numbered(2, 2));
  r = call("read_file", R"({"path":"many.txt","limit":-7,"offset":3})");
  BOOST_TEST(r.get_string("content") == numbered(3, 3));
}

BOOST_AUTO_TEST_CASE(long_lines_are_cut) {
  put("long.txt", std::string(3000, 'x') + "\nshort\n");
  auto r = call("read_file", R"({"path":"long.txt"})");
  BOOST_TEST(r.get_string("content")
             == "1|" + std::string(2000, 'x') + "... [truncated]\n2|short");
  // Exactly the limit is not cut.
  put("exact.txt", std::string(2000, 'y'));
  r = call("read_file", R"({"path":"exact.txt"})");
  BOOST_TEST(r.get_string("content") == "1|" + std::string(2000, 'y'));
}

BOOST_AUTO_TEST_CASE(cutting_a_line_never_splits_a_utf8_character) {
  // 1999 ASCII bytes then a 2-byte character crossing the 2000 boundary.
  put("u.txt", std::string(1999, 'a') + "\xc3\xa9" + std::string(50, 'b'));
  auto r = call("read_file", R"({"path":"u.txt"})");
  auto content = r.get_string("content");
  BOOST_TEST(content == "1|" + std::string(1999, 'a') + "... [truncated]");
  BOOST_TEST(!contains(r.dump(), "\\ufffd"));
  BOOST_TEST(!contains(r.dump(), "\xef\xbf\xbd"));
}

BOOST_AUTO_TEST_CASE(character_budget_stops_on_a_line_boundary) {
  cfg.tool_output.read_char_budget = 100;
  put("budget.txt", lines_file(50, "0123456789-"));
  auto r = call("read_file", R"({"path":"budget.txt"})");
  auto content = r.get_string("content");
  BOOST_TEST(content.size() <= 100u);
  BOOST_TEST(r.get_string("truncated_by") == "bytes");
  BOOST_TEST(r.get_bool("truncated", false) == true);
  auto next = r.get_int("next_offset", -1);
  BOOST_TEST(next > 1);
  BOOST_TEST(content == numbered(1, static_cast<int>(next - 1),
                                 "0123456789-"));
  BOOST_TEST(contains(r.get_string("hint"),
                      "offset=" + std::to_string(next)));
}

BOOST_AUTO_TEST_CASE(crlf_lines_are_shown_without_carriage_returns) {
  put("crlf.txt", "a\r\nb\r\n");
  auto r = call("read_file", R"({"path":"crlf.txt"})");
  BOOST_TEST(r.get_string("content") == "1|a\n2|b");
}

BOOST_AUTO_TEST_CASE(unicode_content_round_trips) {
  put("uni.txt", "héllo wörld\n日本語のテキスト\n😀 emoji\n");
  auto r = call("read_file", R"({"path":"uni.txt"})");
  BOOST_TEST(r.get_string("content")
             == "1|héllo wörld\n2|日本語のテキスト\n3|😀 emoji");
}

BOOST_AUTO_TEST_CASE(invalid_utf8_still_gives_valid_json) {
  put("bad.txt", "good line\nbad \xff\xfe byte\nmore\n");
  auto r = call("read_file", R"({"path":"bad.txt"})");
  BOOST_TEST(error_of(r) == "");
  auto text = r.dump();
  auto reparsed = json::parse(text);
  BOOST_REQUIRE(reparsed);
  BOOST_TEST(contains(reparsed.v->get_string("content"), "3|more"));
}

BOOST_AUTO_TEST_CASE(empty_file_gives_empty_content) {
  put("empty.txt", "");
  auto r = call("read_file", R"({"path":"empty.txt"})");
  BOOST_TEST(error_of(r) == "");
  BOOST_TEST(r.get_string("content", "x") == "");
  BOOST_TEST(r.get_int("total_lines", -1) == 0);
  BOOST_TEST(r.get_bool("truncated", true) == false);
}

BOOST_AUTO_TEST_CASE(large_file_is_streamed_and_counted) {
  // 300k lines, about 4 MB.
  {
    std::ofstream out(work + "/big.log");
    for (int i = 1; i <= 300000; ++i)
      out << "log line number " << i << "\n";
  }
  auto start = std::chrono::steady_clock::now();
  auto r = call("read_file",
                R"({"path":"big.log","offset":299990,"limit":20})");
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
              std::chrono::steady_clock::now() - start)
              .count();
  BOOST_TEST_MESSAGE("read_file on a 300k-line file took " << ms << " ms");
  BOOST_TEST(r.get_int("total_lines", -1) == 300000);
  BOOST_TEST(r.get_string("content").rfind("299990|log line number 299990", 0)
             == 0u);
  BOOST_TEST(r.get_bool("truncated", true) == false);
  BOOST_TEST(ms < 5000);
}

BOOST_AUTO_TEST_CASE(notebooks_are_shown_as_cell_sources) {
  put("nb.ipynb", R"nb({"cells":[
    {"cell_type":"markdown","source":["# Title\n","intro"]},
    {"cell_type":"code","source":"import os\nprint(1)","outputs":[]}],
    "metadata":{},"nbformat":4,"nbformat_minor":5})nb");
  auto r = call("read_file", R"({"path":"nb.ipynb"})");
  BOOST_TEST(r.get_string("content")
             == "1|# %% [markdown] cell 1\n2|# Title\n3|intro\n"
                "4|# %% [code] cell 2\n5|import os\n6|print(1)");
  BOOST_TEST(r.get_string("extracted_from") == "ipynb");
  // Not a notebook after all: shown as text.
  put("broken.ipynb", "{not json\n");
  r = call("read_file", R"({"path":"broken.ipynb"})");
  BOOST_TEST(r.get_string("content") == "1|{not json");
}

// -- error paths --------------------------------------------------------------

BOOST_AUTO_TEST_CASE(missing_file_lists_similar_names) {
  put("config.yaml", "a: 1\n");
  put("config.json", "{}\n");
  put("unrelated.md", "x\n");
  auto r = call("read_file", R"({"path":"config.yml"})");
  BOOST_TEST(error_of(r) == "File not found: " + work + "/config.yml");
  auto similar = r.find("similar_files");
  BOOST_REQUIRE(similar != nullptr);
  BOOST_REQUIRE(similar->is_array());
  bool found = false;
  for (auto& s : similar->as_array())
    found = found || s.as_string() == work + "/config.yaml";
  BOOST_TEST(found);
  for (auto& s : similar->as_array())
    BOOST_TEST(s.as_string() != work + "/unrelated.md");
  BOOST_TEST(similar->size() <= 5u);
}

BOOST_AUTO_TEST_CASE(missing_directory_gives_not_found) {
  auto r = call("read_file", R"({"path":"no/such/dir/file.txt"})");
  BOOST_TEST(contains(error_of(r), "File not found"));
  BOOST_TEST(r.find("similar_files") != nullptr);
}

BOOST_AUTO_TEST_CASE(similar_files_are_capped_at_five) {
  for (int i = 0; i < 12; ++i)
    put("report" + std::to_string(i) + ".txt", "x\n");
  auto r = call("read_file", R"({"path":"report.txt"})");
  BOOST_REQUIRE(r.find("similar_files") != nullptr);
  BOOST_TEST(r.find("similar_files")->size() == 5u);
}

BOOST_AUTO_TEST_CASE(offset_past_end_is_an_error_naming_the_length) {
  put("three.txt", "a\nb\nc\n");
  auto r = call("read_file", R"({"path":"three.txt","offset":10})");
  BOOST_TEST(contains(error_of(r), "past the end"));
  BOOST_TEST(contains(error_of(r), "3 lines"));
  BOOST_TEST(r.get_int("total_lines", -1) == 3);
  put("empty.txt", "");
  r = call("read_file", R"({"path":"empty.txt","offset":2})");
  BOOST_TEST(contains(error_of(r), "empty"));
}

BOOST_AUTO_TEST_CASE(directory_is_refused) {
  fs::create_directories(work + "/sub");
  auto r = call("read_file", R"({"path":"sub"})");
  BOOST_TEST(contains(error_of(r), "directory"));
}

BOOST_AUTO_TEST_CASE(fifo_is_refused_without_blocking) {
  BOOST_REQUIRE(::mkfifo((work + "/pipe").c_str(), 0600) == 0);
  auto r = call("read_file", R"({"path":"pipe"})");
  BOOST_TEST(contains(error_of(r), "Not a regular file"));
}

BOOST_AUTO_TEST_CASE(binary_file_is_flagged) {
  put("blob.bin", std::string("\x7f" "ELF\0\0\0\x01\x02", 9) + "junk");
  auto r = call("read_file", R"({"path":"blob.bin"})");
  BOOST_TEST(r.get_bool("is_binary", false) == true);
  BOOST_TEST(error_of(r) != "");
  BOOST_TEST(r.find("content") == nullptr);
  // Mostly control bytes without NUL also counts as binary.
  std::string noise;
  for (int i = 0; i < 1000; ++i)
    noise += static_cast<char>(1 + i % 8);
  put("noise.dat", noise);
  r = call("read_file", R"({"path":"noise.dat"})");
  BOOST_TEST(r.get_bool("is_binary", false) == true);
}

BOOST_AUTO_TEST_CASE(images_are_flagged_by_magic_and_extension) {
  put("pic.dat", std::string("\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16));
  auto r = call("read_file", R"({"path":"pic.dat"})");
  BOOST_TEST(r.get_bool("is_image", false) == true);
  BOOST_TEST(contains(error_of(r), "image/png"));
  BOOST_TEST(r.get_string("hint") != "");
  put("photo.JPG", "not really a jpeg but named like one");
  r = call("read_file", R"({"path":"photo.JPG"})");
  BOOST_TEST(r.get_bool("is_image", false) == true);
  // SVG is text.
  put("icon.svg", "<svg xmlns=\"http://www.w3.org/2000/svg\"></svg>\n");
  r = call("read_file", R"({"path":"icon.svg"})");
  BOOST_TEST(r.find("is_image") == nullptr);
  BOOST_TEST(r.get_string("content") != "");
}

BOOST_AUTO_TEST_CASE(secrets_and_credential_stores_are_refused) {
  dir.write("home/.mibyan/.env", "OPENAI_API_KEY=sk-secret\n");
  auto r = call("read_file", R"({"path":"~/.mibyan/.env"})");
  BOOST_TEST(contains(error_of(r), "Access denied"));
  BOOST_TEST(!contains(r.dump(), "sk-secret"));
  dir.write("home/.ssh/id_ed25519", "PRIVATE KEY\n");
  r = call("read_file", R"({"path":"~/.ssh/id_ed25519"})");
  BOOST_TEST(contains(error_of(r), "Access denied"));
  dir.write("home/.netrc", "machine x password y\n");
  r = call("read_file", R"({"path":"~/.netrc"})");
  BOOST_TEST(contains(error_of(r), "Access denied"));
  // Public keys are fine.
  dir.write("home/.ssh/id_ed25519.pub", "ssh-ed25519 AAAA\n");
  r = call("read_file", R"({"path":"~/.ssh/id_ed25519.pub"})");
  BOOST_TEST(r.get_string("content") == "1|ssh-ed25519 AAAA");
}

BOOST_AUTO_TEST_CASE(symlink_to_a_secret_is_refused) {
  dir.write("home/.mibyan/.env", "KEY=sk-secret\n");
  fs::create_symlink(mibyan_home + "/.env", work + "/innocent.txt");
  auto r = call("read_file", R"({"path":"innocent.txt"})");
  BOOST_TEST(contains(error_of(r), "Access denied"));
  BOOST_TEST(!contains(r.dump(), "sk-secret"));
  // .. tricks are normalised too.
  r = call("read_file",
           obj({{"path", work + "/../home/.mibyan/./.env"}}));
  BOOST_TEST(contains(error_of(r), "Access denied"));
}

// Issue 14 item 9: a symlinked $MIBYAN_HOME, a hard link and $MIBYAN_ENV's
// file must not open the secrets.
BOOST_AUTO_TEST_CASE(secrets_behind_a_symlinked_home_are_refused) {
  auto real = dir / "real-home";
  fs::create_directories(real);
  dir.write("real-home/.env", "OPENAI_API_KEY=sk-secret\n");
  auto link = dir / "link-home";
  fs::create_symlink(real, link);
  auto c = ctx;
  c.home = link;
  auto r = call_with(c, "read_file", obj({{"path", real + "/.env"}}));
  BOOST_TEST(contains(error_of(r), "Access denied"));
  BOOST_TEST(!contains(r.dump(), "sk-secret"));
  r = call_with(c, "read_file", obj({{"path", link + "/.env"}}));
  BOOST_TEST(contains(error_of(r), "Access denied"));
  // And the other way round: the home as its real path, the file by link.
  c.home = real;
  r = call_with(c, "read_file", obj({{"path", link + "/.env"}}));
  BOOST_TEST(contains(error_of(r), "Access denied"));
}

BOOST_AUTO_TEST_CASE(hard_link_to_a_secret_is_refused) {
  dir.write("home/.mibyan/.env", "OPENAI_API_KEY=sk-secret\n");
  BOOST_REQUIRE(::link((mibyan_home + "/.env").c_str(),
                       (work + "/notes.txt").c_str()) == 0);
  auto r = call("read_file", R"({"path":"notes.txt"})");
  BOOST_TEST(contains(error_of(r), "Access denied"));
  BOOST_TEST(!contains(r.dump(), "sk-secret"));
  // A hard link to an SSH private key inside ~/.ssh as well.
  dir.write("home/.ssh/id_rsa", "PRIVATE KEY\n");
  BOOST_REQUIRE(::link((home + "/.ssh/id_rsa").c_str(),
                       (work + "/k.txt").c_str()) == 0);
  r = call("read_file", R"({"path":"k.txt"})");
  BOOST_TEST(contains(error_of(r), "Access denied"));
  BOOST_TEST(!contains(r.dump(), "PRIVATE"));
  // An ordinary file with two names stays readable.
  put("a.txt", "plain\n");
  BOOST_REQUIRE(::link((work + "/a.txt").c_str(), (work + "/b.txt").c_str())
                == 0);
  r = call("read_file", R"({"path":"b.txt"})");
  BOOST_TEST(r.get_string("content") == "1|plain");
}

BOOST_AUTO_TEST_CASE(mibyan_env_file_and_session_store_are_refused) {
  auto secrets = put("secrets/prod.env", "OPENAI_API_KEY=sk-secret\n");
  ::setenv("MIBYAN_ENV", secrets.c_str(), 1);
  auto r = call("read_file", R"({"path":"secrets/prod.env"})");
  ::unsetenv("MIBYAN_ENV");
  BOOST_TEST(contains(error_of(r), "Access denied"));
  BOOST_TEST(!contains(r.dump(), "sk-secret"));
  dir.write("home/.mibyan/sessions/data.mdb", "conversation\n");
  r = call("read_file", R"({"path":"~/.mibyan/sessions/data.mdb"})");
  BOOST_TEST(contains(error_of(r), "session store"));
  // Another profile's .env too.
  dir.write("home/.mibyan/profiles/work/.env", "K=sk-other\n");
  r = call("read_file", R"({"path":"~/.mibyan/profiles/work/.env"})");
  BOOST_TEST(contains(error_of(r), "Access denied"));
}

// The resolved protected paths are cached per home (tools/path_policy.hpp):
// secrets that appear, and links that move, after the cache was filled must
// be refused all the same.
BOOST_AUTO_TEST_CASE(secrets_appearing_after_a_cached_check_are_refused) {
  // A new file each time: a re-read of the same window gets a stub.
  int warmed = 0;
  auto warm = [&](const tool_context& c) {
    auto name = "plain" + std::to_string(++warmed) + ".txt";
    put(name, "plain\n");
    auto r = call_with(c, "read_file", obj({{"path", name}}));
    BOOST_TEST(r.get_string("content") == "1|plain");
  };
  warm(ctx);
  dir.write("home/.mibyan/profiles/late/.env", "K=sk-late\n");
  auto r = call("read_file", R"({"path":"~/.mibyan/profiles/late/.env"})");
  BOOST_TEST(contains(error_of(r), "Access denied"));
  warm(ctx);
  dir.write("home/.netrc", "machine x password late\n");
  BOOST_REQUIRE(::link((home + "/.netrc").c_str(),
                       (work + "/netrc-copy.txt").c_str()) == 0);
  r = call("read_file", R"({"path":"netrc-copy.txt"})");
  BOOST_TEST(contains(error_of(r), "Access denied"));
  BOOST_TEST(!contains(r.dump(), "password late"));
  // A home reached through a symlink that is moved to another directory
  // after the check: the new target's secrets are the protected ones.
  auto a = dir / "home-a";
  auto b = dir / "home-b";
  fs::create_directories(a);
  fs::create_directories(b);
  dir.write("home-b/.env", "OPENAI_API_KEY=sk-moved\n");
  auto link = dir / "moving-home";
  fs::create_symlink(a, link);
  auto c = ctx;
  c.home = link;
  warm(c);
  fs::remove(link);
  fs::create_symlink(b, link);
  r = call_with(c, "read_file", obj({{"path", b + "/.env"}}));
  BOOST_TEST(contains(error_of(r), "Access denied"));
  BOOST_TEST(!contains(r.dump(), "sk-moved"));
}

BOOST_AUTO_TEST_CASE(cancelled_call_returns_early) {
  std::string big;
  for (int i = 0; i < 20000; ++i)
    big += "some text on a line\n";
  put("big.txt", big);
  cancelled = true;
  auto r = call("read_file", R"({"path":"big.txt"})");
  BOOST_TEST(contains(error_of(r), "cancelled"));
}

// -- bad arguments ------------------------------------------------------------

BOOST_AUTO_TEST_CASE(bad_arguments_of_every_shape) {
  put("a.txt", "x\n");
  auto r = call("read_file", R"({"path":5})");
  BOOST_TEST(contains(error_of(r), "'path'"));
  BOOST_TEST(contains(error_of(r), "expected string"));
  r = call("read_file", R"({})");
  BOOST_TEST(contains(error_of(r), "Missing required argument 'path'"));
  r = call("read_file", R"({"path":null})");
  BOOST_TEST(contains(error_of(r), "Missing required argument 'path'"));
  r = call("read_file", R"({"path":"a.txt","offset":"abc"})");
  BOOST_TEST(contains(error_of(r), "'offset'"));
  r = call("read_file", R"({"path":"a.txt","offset":0})");
  BOOST_TEST(contains(error_of(r), ">= 1"));
  r = call("read_file", R"({"path":"a.txt","offset":-3})");
  BOOST_TEST(contains(error_of(r), ">= 1"));
  r = call("read_file", R"({"path":"a.txt","limit":[1]})");
  BOOST_TEST(contains(error_of(r), "'limit'"));
  r = call("read_file", R"({"path":["a.txt"]})");
  BOOST_TEST(contains(error_of(r), "expected string"));
  r = call("read_file", R"([1,2,3])");
  BOOST_TEST(error_of(r) == "Invalid tool arguments");
  r = call("read_file", R"("a.txt")");
  BOOST_TEST(error_of(r) == "Invalid tool arguments");
  r = call("read_file", R"({"path": "a.txt")");
  BOOST_TEST(error_of(r) == "Invalid tool arguments");
  r = call("read_file", R"({"path":""})");
  BOOST_TEST(contains(error_of(r), "empty"));
  // Coercion: numeric strings are accepted.
  r = call("read_file", R"({"path":"a.txt","offset":"1","limit":"10"})");
  BOOST_TEST(r.get_string("content") == "1|x");
}

BOOST_AUTO_TEST_CASE(huge_and_odd_paths_are_rejected_cleanly) {
  auto r = call("read_file", obj({{"path", std::string(10 << 20, 'a')}}));
  BOOST_TEST(contains(error_of(r), "too long"));
  r = call("read_file", obj({{"path", std::string("a\0b", 3)}}));
  BOOST_TEST(contains(error_of(r), "NUL"));
  r = call("read_file", obj({{"path", std::string(300, 'n') + ".txt"}}));
  BOOST_TEST(error_of(r) != "");
  r = call("read_file", obj({{"path", "\xff\xfe.txt"}}));
  BOOST_TEST(contains(error_of(r), "File not found"));
  BOOST_TEST(json::parse(r.dump()).v.has_value());
}

// -- re-read guard ------------------------------------------------------------

BOOST_AUTO_TEST_CASE(identical_rereads_get_a_stub_then_are_blocked) {
  put("g.txt", "content\n");
  auto r1 = call("read_file", R"({"path":"g.txt"})");
  BOOST_TEST(r1.get_string("content") == "1|content");
  auto r2 = call("read_file", R"({"path":"g.txt"})");
  BOOST_TEST(r2.get_string("status") == "unchanged");
  BOOST_TEST(r2.get_bool("dedup", false) == true);
  BOOST_TEST(r2.get_bool("content_returned", true) == false);
  BOOST_TEST(r2.find("content") == nullptr);
  auto r3 = call("read_file", R"({"path":"g.txt"})");
  BOOST_TEST(r3.get_string("status") == "unchanged");
  auto r4 = call("read_file", R"({"path":"g.txt"})");
  BOOST_TEST(contains(error_of(r4), "BLOCKED"));
  // A different window is fine.
  auto r5 = call("read_file", R"({"path":"g.txt","limit":10})");
  BOOST_TEST(r5.get_string("content") == "1|content");
}

BOOST_AUTO_TEST_CASE(reread_after_a_change_returns_content) {
  put("c.txt", "v1\n");
  call("read_file", R"({"path":"c.txt"})");
  put("c.txt", "version 2\n");
  auto r = call("read_file", R"({"path":"c.txt"})");
  BOOST_TEST(r.get_string("content") == "1|version 2");
}

BOOST_AUTO_TEST_CASE(same_window_read_three_times_warns_then_blocks) {
  for (int i = 1; i <= 4; ++i) {
    put("p.txt", "round " + std::to_string(i) + std::string(i, '!') + "\n");
    auto r = call("read_file", R"({"path":"p.txt"})");
    if (i < 3) {
      BOOST_TEST(r.find("_warning") == nullptr);
      BOOST_TEST(error_of(r) == "");
    } else if (i == 3) {
      BOOST_TEST(contains(r.get_string("_warning"), "3 times"));
      BOOST_TEST(r.get_string("content") != "");
    } else {
      BOOST_TEST(contains(error_of(r), "BLOCKED"));
    }
  }
}

BOOST_AUTO_TEST_CASE(script_calls_and_sessionless_calls_are_exempt) {
  put("s.txt", "data\n");
  auto script_ctx = ctx;
  script_ctx.from_script = true;
  for (int i = 0; i < 6; ++i) {
    auto r = call_with(script_ctx, "read_file", obj({{"path", "s.txt"}}));
    BOOST_TEST(r.get_string("content") == "1|data");
  }
  auto anon = ctx;
  anon.session_id.clear();
  for (int i = 0; i < 6; ++i) {
    auto r = call_with(anon, "read_file", obj({{"path", "s.txt"}}));
    BOOST_TEST(r.get_string("content") == "1|data");
  }
  // Sessions do not share state.
  auto other = ctx;
  other.session_id = "session-2";
  call("read_file", R"({"path":"s.txt"})");
  auto r = call_with(other, "read_file", obj({{"path", "s.txt"}}));
  BOOST_TEST(r.get_string("content") == "1|data");
}

BOOST_AUTO_TEST_CASE(parallel_reads_are_safe) {
  put("par.txt", lines_file(1000));
  std::vector<std::thread> threads;
  std::atomic<int> good{0};
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      auto c = ctx;
      c.session_id = "s" + std::to_string(t);
      for (int i = 0; i < 20; ++i) {
        auto r = call_with(c, "read_file",
                           obj({{"path", "par.txt"},
                                {"offset", 1 + i * 10},
                                {"limit", 10}}));
        if (r.get_string("content") == numbered(1 + i * 10, 10 + i * 10))
          ++good;
      }
    });
  for (auto& th : threads)
    th.join();
  BOOST_TEST(good.load() == 160);
}

// -- paging with the line index -----------------------------------------------

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

BOOST_AUTO_TEST_CASE(tool_metadata) {
  auto t = reg.find("read_file");
  BOOST_REQUIRE(t != nullptr);
  BOOST_TEST(std::string{t->toolset()} == "file");
  BOOST_TEST(t->parallel_safe());
  auto s = t->schema();
  BOOST_TEST(s["properties"]["path"].get_string("type") == "string");
  BOOST_TEST(s["properties"]["offset"].get_string("type") == "integer");
  BOOST_TEST(s["properties"]["limit"].get_string("type") == "integer");
  BOOST_TEST(contains(t->description(), "offset"));
}

BOOST_AUTO_TEST_SUITE_END()

// -- the line index itself ----------------------------------------------------

namespace {

// Opens a file for reading; closes it on destruction.
struct open_file {
  int fd;
  explicit open_file(const std::string& path)
    : fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
  }
  ~open_file() {
    if (fd >= 0)
      ::close(fd);
  }
};

// Returns "" when `idx` correctly indexes `text`, else what is wrong.
std::string index_problem(const line_index& idx, const std::string& text) {
  auto lines = static_cast<int64_t>(split_lines(text).size());
  if (idx.total_lines != lines)
    return "total_lines " + std::to_string(idx.total_lines) + ", want "
           + std::to_string(lines);
  if (idx.size != static_cast<int64_t>(text.size()))
    return "size " + std::to_string(idx.size);
  if (idx.checkpoints.empty() || idx.checkpoints[0].line != 1
      || idx.checkpoints[0].offset != 0)
    return "first checkpoint is not {1, 0}";
  for (size_t i = 1; i < idx.checkpoints.size(); ++i) {
    auto cp = idx.checkpoints[i];
    if (cp.line <= idx.checkpoints[i - 1].line
        || cp.offset <= idx.checkpoints[i - 1].offset)
      return "checkpoints not increasing at " + std::to_string(i);
    if (cp.offset >= static_cast<int64_t>(text.size()) || cp.line > lines)
      return "checkpoint past the end at " + std::to_string(i);
    if (text[static_cast<size_t>(cp.offset - 1)] != '\n')
      return "checkpoint " + std::to_string(i) + " not at a line start";
    auto before = std::count(text.begin(), text.begin() + cp.offset, '\n');
    if (before != cp.line - 1)
      return "checkpoint " + std::to_string(i) + " names line "
             + std::to_string(cp.line) + ", is line "
             + std::to_string(before + 1);
  }
  for (int64_t l = 1; l <= lines; l += 1 + l / 7) {
    auto cp = idx.nearest(l);
    auto next = std::upper_bound(
      idx.checkpoints.begin(), idx.checkpoints.end(), l,
      [](int64_t x, const line_checkpoint& c) { return x < c.line; });
    if (cp.line > l || (next != idx.checkpoints.begin()
                        && (next - 1)->line != cp.line))
      return "nearest(" + std::to_string(l) + ") is not the closest";
  }
  return {};
}

std::shared_ptr<const line_index> index_text(const std::string& path,
                                             const std::string& text,
                                             const line_index_limits& lim) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  open_file f{path};
  int err = -1;
  auto idx = build_line_index(f.fd, static_cast<int64_t>(text.size()), {},
                              err, lim);
  if (idx == nullptr || err != 0)
    return nullptr;
  return idx;
}

std::shared_ptr<line_index> fake_index(int64_t size, int64_t built_at_ns) {
  auto idx = std::make_shared<line_index>();
  idx->checkpoints.push_back(line_checkpoint{1, 0});
  idx->size = size;
  idx->built_at_ns = built_at_ns;
  return idx;
}

file_version version(uint64_t inode, int64_t size, int64_t mtime_ns) {
  file_version v;
  v.device = 7;
  v.inode = inode;
  v.size = size;
  v.mtime_ns = mtime_ns;
  v.ctime_ns = mtime_ns;
  return v;
}

constexpr int64_t sec = 1000000000;

} // namespace

BOOST_AUTO_TEST_SUITE(line_index_unit)

BOOST_AUTO_TEST_CASE(counts_lines_like_read_file_shows_them) {
  mibyan::test::temp_dir dir;
  auto path = dir / "t.txt";
  std::pair<const char*, int64_t> cases[] = {
    {"", 0},     {"a", 1},      {"a\n", 1},         {"a\nb", 2},
    {"\n", 1},   {"\n\n", 2},   {"a\r\nb\r\n", 2},  {"a\r\nb\r", 2},
    {"x\n\ny", 3},
  };
  for (auto& [text, lines] : cases) {
    auto idx = index_text(path, text, {});
    BOOST_REQUIRE(idx != nullptr);
    BOOST_TEST(idx->total_lines == lines, "text '" << text << "'");
    BOOST_TEST(index_problem(*idx, text) == "");
    BOOST_TEST(idx->checkpoints.size() == 1u);
  }
}

BOOST_AUTO_TEST_CASE(checkpoints_name_line_starts) {
  mibyan::test::temp_dir dir;
  auto path = dir / "t.txt";
  auto text = varied_text(5000, "\r\n", 2500) + "no newline";
  // Small blocks and strides: lines cross block boundaries, both strides
  // trigger and the checkpoint list is thinned several times.
  line_index_limits lim;
  lim.line_stride = 3;
  lim.byte_stride = 200;
  lim.max_checkpoints = 16;
  lim.block_bytes = 4096;
  auto idx = index_text(path, text, lim);
  BOOST_REQUIRE(idx != nullptr);
  BOOST_TEST(index_problem(*idx, text) == "");
  BOOST_TEST(idx->checkpoints.size() <= 16u);
  BOOST_TEST(idx->checkpoints.size() >= 8u);
  // Default limits: a checkpoint at least every 1024 lines.
  text = varied_text(30000);
  idx = index_text(path, text, {});
  BOOST_REQUIRE(idx != nullptr);
  BOOST_TEST(index_problem(*idx, text) == "");
  for (size_t i = 1; i < idx->checkpoints.size(); ++i)
    BOOST_TEST(idx->checkpoints[i].line - idx->checkpoints[i - 1].line
               <= 1024);
  auto last = idx->checkpoints.back();
  BOOST_TEST(idx->total_lines - last.line < 1024);
  // Very many tiny lines stay within max_checkpoints.
  text = std::string(3000000, '\n');
  idx = index_text(path, text, {});
  BOOST_REQUIRE(idx != nullptr);
  BOOST_TEST(idx->total_lines == 3000000);
  BOOST_TEST(idx->checkpoints.size() <= 8192u);
  BOOST_TEST(idx->checkpoints.size() > 1000u);
  BOOST_TEST(index_problem(*idx, text) == "");
}

BOOST_AUTO_TEST_CASE(indexes_only_the_bytes_asked_for_or_present) {
  mibyan::test::temp_dir dir;
  auto path = dir / "t.txt";
  std::ofstream(path, std::ios::binary) << "one\ntwo\nthree\nfour";
  open_file f{path};
  int err = -1;
  auto idx = build_line_index(f.fd, 8, {}, err);
  BOOST_REQUIRE(idx != nullptr);
  BOOST_TEST(err == 0);
  BOOST_TEST(idx->size == 8);
  BOOST_TEST(idx->total_lines == 2);
  idx = build_line_index(f.fd, 1000, {}, err);
  BOOST_REQUIRE(idx != nullptr);
  BOOST_TEST(idx->size == 18);
  BOOST_TEST(idx->total_lines == 4);
}

BOOST_AUTO_TEST_CASE(stops_when_asked_and_reports_read_errors) {
  mibyan::test::temp_dir dir;
  auto path = dir / "t.txt";
  std::ofstream(path, std::ios::binary) << lines_file(100000);
  open_file f{path};
  int calls = 0;
  int err = 0;
  line_index_limits lim;
  lim.block_bytes = 4096;
  auto idx = build_line_index(
    f.fd, static_cast<int64_t>(fs::file_size(path)),
    [&] { return ++calls > 3; }, err, lim);
  BOOST_TEST(idx == nullptr);
  BOOST_TEST(err == ECANCELED);
  BOOST_TEST(calls == 4);
  idx = build_line_index(-1, 100, {}, err);
  BOOST_TEST(idx == nullptr);
  BOOST_TEST(err == EBADF);
  // A directory cannot be read.
  open_file d{dir.path()};
  idx = build_line_index(d.fd, 100, {}, err);
  BOOST_TEST(idx == nullptr);
  BOOST_TEST(err == EISDIR);
}

BOOST_AUTO_TEST_CASE(cache_returns_only_the_matching_version) {
  line_index_cache cache{8};
  int64_t t = 1700000000 * sec + 5;
  auto v = version(1, 100, t);
  auto idx = fake_index(100, t + sec);
  BOOST_TEST(cache.insert(v, idx));
  BOOST_TEST(cache.find(v) == idx);
  BOOST_TEST(cache.size() == 1u);
  // Any differing field misses and drops the stale entry.
  auto changed = [&](auto edit) {
    auto w = v;
    edit(w);
    BOOST_TEST(cache.insert(v, idx));
    bool missed = cache.find(w) == nullptr;
    bool dropped = cache.find(v) == nullptr;
    return missed && (dropped || w.inode != v.inode
                      || w.device != v.device);
  };
  BOOST_TEST(changed([](file_version& w) { w.size = 101; }));
  BOOST_TEST(changed([](file_version& w) { w.mtime_ns += 1; }));
  BOOST_TEST(changed([](file_version& w) { w.ctime_ns += 1; }));
  BOOST_TEST(changed([](file_version& w) { w.inode = 2; }));
  BOOST_TEST(changed([](file_version& w) { w.device = 8; }));
  // An index covering other bytes than the version's size is refused.
  BOOST_TEST(!cache.insert(version(3, 99, t), idx));
  BOOST_TEST(!cache.insert(v, nullptr));
  BOOST_TEST(cache.find(version(3, 99, t)) == nullptr);
}

BOOST_AUTO_TEST_CASE(cache_refuses_racy_indexes) {
  line_index_cache cache{8};
  int64_t t = 1700000000 * sec + 5;
  // Sub-second timestamps: 50 ms.
  BOOST_TEST(!cache.insert(version(1, 10, t), fake_index(10, t)));
  BOOST_TEST(!cache.insert(version(1, 10, t), fake_index(10, t + sec / 25)));
  BOOST_TEST(cache.insert(version(1, 10, t), fake_index(10, t + sec / 10)));
  // Built before the change (clock skew): never stored.
  BOOST_TEST(!cache.insert(version(2, 10, t), fake_index(10, t - sec)));
  // Whole-second timestamps: 2 s.
  int64_t whole = 1700000000 * sec;
  BOOST_TEST(!cache.insert(version(3, 10, whole),
                           fake_index(10, whole + sec)));
  BOOST_TEST(cache.insert(version(3, 10, whole),
                          fake_index(10, whole + 3 * sec)));
  // The later of mtime and ctime counts.
  auto v = version(4, 10, t);
  v.ctime_ns = t + 10 * sec;
  BOOST_TEST(!cache.insert(v, fake_index(10, t + sec)));
  BOOST_TEST(cache.size() == 2u);
}

BOOST_AUTO_TEST_CASE(cache_evicts_the_least_recently_used) {
  line_index_cache cache{2};
  int64_t t = 1700000000 * sec + 5;
  auto a = version(1, 10, t), b = version(2, 10, t), c = version(3, 10, t);
  auto ia = fake_index(10, t + sec), ib = fake_index(10, t + sec),
       ic = fake_index(10, t + sec);
  BOOST_TEST(cache.insert(a, ia));
  BOOST_TEST(cache.insert(b, ib));
  BOOST_TEST(cache.find(a) == ia); // a is now the most recent
  BOOST_TEST(cache.insert(c, ic));
  BOOST_TEST(cache.size() == 2u);
  BOOST_TEST(cache.find(b) == nullptr);
  BOOST_TEST(cache.find(a) == ia);
  BOOST_TEST(cache.find(c) == ic);
  // Re-inserting a file replaces its entry instead of adding one.
  auto a2 = version(1, 10, t + 1);
  auto ia2 = fake_index(10, t + sec);
  BOOST_TEST(cache.insert(a2, ia2));
  BOOST_TEST(cache.size() == 2u);
  BOOST_TEST(cache.find(a2) == ia2);
  BOOST_TEST(cache.find(c) == ic);
  line_index_cache none{0};
  BOOST_TEST(!none.insert(a, ia));
  BOOST_TEST(none.find(a) == nullptr);
}

BOOST_AUTO_TEST_CASE(cache_is_thread_safe) {
  line_index_cache cache{16};
  int64_t t = 1700000000 * sec + 5;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int th = 0; th < 6; ++th)
    threads.emplace_back([&, th] {
      for (int i = 0; i < 20000; ++i) {
        auto inode = static_cast<uint64_t>((i * 7 + th) % 40);
        auto v = version(inode, static_cast<int64_t>(inode) + 1, t);
        if (auto found = cache.find(v)) {
          if (found->size != static_cast<int64_t>(inode) + 1)
            ++wrong;
        } else {
          cache.insert(v, fake_index(v.size, t + sec));
        }
      }
    });
  for (auto& th : threads)
    th.join();
  BOOST_TEST(wrong.load() == 0);
  BOOST_TEST(cache.size() <= 16u);
}

BOOST_AUTO_TEST_SUITE_END()
