// The read_file tool (docs/tools.md): numbered windows, limits, formats,
// error paths, refused secrets, bad arguments and the re-read guard.
// Paging through large files with the line index: read_file_paging_test;
// the line index itself: line_index_test.
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
#include "tests/support/line_texts.hpp"

using namespace mibyan;
using mibyan::test::error_of;
using mibyan::test::lines_file;
using mibyan::test::numbered;
using mibyan::test::obj;
namespace fs = std::filesystem;

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
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
