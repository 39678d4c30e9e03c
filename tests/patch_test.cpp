#define BOOST_TEST_MODULE patch
#include <boost/test/unit_test.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <thread>

#include <sys/stat.h>

#include "tests/support/file_tool_fixture.hpp"
#include "tools/fuzzy_match.hpp"
#include "tools/unified_diff.hpp"

using namespace mibyan;
using mibyan::test::error_of;
using mibyan::test::obj;
using mibyan::test::slurp;
namespace fs = std::filesystem;

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

json::value replace_args(const std::string& path, const std::string& old_s,
                         const std::string& new_s, bool all = false) {
  return obj({{"path", path}, {"old_string", old_s}, {"new_string", new_s},
              {"replace_all", all}});
}

// Applies `diff` to a copy of `before` with GNU patch; returns the result or
// "<patch failed>".
std::string apply_with_gnu_patch(const mibyan::test::temp_dir& dir,
                                 const std::string& before,
                                 const std::string& diff) {
  auto target = dir.write("gnu/target.txt", before);
  auto diff_file = dir.write("gnu/change.diff", diff);
  auto cmd = "patch -s --binary -o " + dir / "gnu/out.txt" + " " + target
             + " < " + diff_file + " > /dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0)
    return "<patch failed>";
  return slurp(dir / "gnu/out.txt");
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(patch, mibyan::test::file_tool_fixture)

// -- replace mode: normal use -------------------------------------------------

BOOST_AUTO_TEST_CASE(replaces_a_unique_string_and_returns_a_diff) {
  put("app.py", "def main():\n    print('hello')\n    return 0\n");
  auto r = call("patch", replace_args("app.py", "print('hello')",
                                      "print('goodbye')"));
  BOOST_TEST(error_of(r) == "");
  BOOST_TEST(r.get_bool("success", false) == true);
  BOOST_TEST(get("app.py")
             == "def main():\n    print('goodbye')\n    return 0\n");
  BOOST_TEST(r.get_string("diff")
             == "--- a/app.py\n+++ b/app.py\n@@ -1,3 +1,3 @@\n"
                " def main():\n-    print('hello')\n+    print('goodbye')\n"
                "     return 0\n");
  BOOST_TEST(r.get_string("resolved_path") == work + "/app.py");
  BOOST_REQUIRE(r.find("files_modified") != nullptr);
  BOOST_TEST(r.find("files_modified")->as_array()[0].as_string()
             == work + "/app.py");
  BOOST_TEST(r.find("match_strategy") == nullptr);
}

BOOST_AUTO_TEST_CASE(mode_defaults_to_replace_and_accepts_it_explicitly) {
  put("m.txt", "abc\n");
  auto r = call("patch", R"({"mode":"replace","path":"m.txt",
                             "old_string":"b","new_string":"B"})");
  BOOST_TEST(r.get_bool("success", false) == true);
  BOOST_TEST(get("m.txt") == "aBc\n");
}

BOOST_AUTO_TEST_CASE(new_string_may_be_empty_to_delete) {
  put("d.txt", "keep\ndrop me\nkeep too\n");
  auto r = call("patch", replace_args("d.txt", "drop me\n", ""));
  BOOST_TEST(r.get_bool("success", false) == true);
  BOOST_TEST(get("d.txt") == "keep\nkeep too\n");
}

BOOST_AUTO_TEST_CASE(several_matches_need_replace_all) {
  put("dup.txt", "x = 1\ny = 1\nx = 1\n");
  auto r = call("patch", replace_args("dup.txt", "x = 1", "x = 2"));
  BOOST_TEST(error_of(r)
             == "Found 2 matches for old_string. Provide more context to "
                "make it unique, or use replace_all=True.");
  BOOST_TEST(r.get_bool("success", true) == false);
  BOOST_TEST(get("dup.txt") == "x = 1\ny = 1\nx = 1\n");
  r = call("patch", replace_args("dup.txt", "x = 1", "x = 2", true));
  BOOST_TEST(r.get_bool("success", false) == true);
  BOOST_TEST(r.get_int("replacements", -1) == 2);
  BOOST_TEST(get("dup.txt") == "x = 2\ny = 1\nx = 2\n");
}

BOOST_AUTO_TEST_CASE(preserves_crlf_line_endings) {
  put("win.txt", "first\r\nsecond\r\nthird\r\n");
  auto r = call("patch", replace_args("win.txt", "second\nthird",
                                      "2nd\ninserted\nthird"));
  BOOST_TEST(error_of(r) == "");
  BOOST_TEST(get("win.txt") == "first\r\n2nd\r\ninserted\r\nthird\r\n");
  // A CRLF old_string works as well.
  r = call("patch", replace_args("win.txt", "first\r\n2nd", "1st\r\n2nd"));
  BOOST_TEST(error_of(r) == "");
  BOOST_TEST(get("win.txt") == "1st\r\n2nd\r\ninserted\r\nthird\r\n");
}

BOOST_AUTO_TEST_CASE(unicode_text_is_patched) {
  put("u.txt", "naïve café\n日本語\n😀 smile\n");
  auto r = call("patch", replace_args("u.txt", "日本語", "中文"));
  BOOST_TEST(error_of(r) == "");
  BOOST_TEST(get("u.txt") == "naïve café\n中文\n😀 smile\n");
  BOOST_TEST(contains(r.get_string("diff"), "+中文"));
}

BOOST_AUTO_TEST_CASE(keeps_the_file_mode) {
  auto p = put("tool.sh", "#!/bin/sh\necho a\n");
  ::chmod(p.c_str(), 0755);
  auto r = call("patch", replace_args("tool.sh", "echo a", "echo b"));
  BOOST_TEST(error_of(r) == "");
  struct stat st;
  ::stat(p.c_str(), &st);
  BOOST_TEST((st.st_mode & 07777) == 0755u);
}

// -- fuzzy strategies ---------------------------------------------------------

BOOST_AUTO_TEST_CASE(line_trimmed_match_keeps_indentation) {
  put("f.py", "class A:\n    def f(self):\n        x = 1\n        y = 2\n");
  auto r = call("patch", replace_args("f.py", "x = 1\ny = 2",
                                      "x = 10\ny = 20"));
  BOOST_TEST(error_of(r) == "");
  BOOST_TEST(r.get_string("match_strategy") == "line_trimmed");
  BOOST_TEST(get("f.py")
             == "class A:\n    def f(self):\n        x = 10\n        y = 20\n");
}

BOOST_AUTO_TEST_CASE(wrong_indentation_is_shifted_to_the_file) {
  put("g.py", "def f():\n    if x:\n        a()\n        b()\n");
  // The model quotes the block without its leading indentation.
  auto r = call("patch", replace_args("g.py", "if x:\n    a()\n    b()",
                                      "if x:\n    a()\n    c()"));
  BOOST_TEST(error_of(r) == "");
  BOOST_TEST(get("g.py") == "def f():\n    if x:\n        a()\n        c()\n");
}

BOOST_AUTO_TEST_CASE(whitespace_normalized_match) {
  put("w.c", "int  x   =  1;\nint y = 2;\n");
  auto r = call("patch", replace_args("w.c", "int x = 1;", "int x = 3;"));
  BOOST_TEST(error_of(r) == "");
  BOOST_TEST(r.get_string("match_strategy") == "whitespace_normalized");
  BOOST_TEST(get("w.c") == "int x = 3;\nint y = 2;\n");
}

BOOST_AUTO_TEST_CASE(indentation_flexible_skips_blank_lines) {
  put("b.py", "def f():\n\n    return 1\n\nprint(f())\n");
  auto r = call("patch", replace_args("b.py", "def f():\n    return 1",
                                      "def f():\n    return 2"));
  BOOST_TEST(error_of(r) == "");
  BOOST_TEST(r.get_string("match_strategy") == "indentation_flexible");
  BOOST_TEST(get("b.py") == "def f():\n    return 2\n\nprint(f())\n");
}

BOOST_AUTO_TEST_CASE(escape_normalized_match) {
  put("e.txt", "alpha\nbeta\n");
  // The model sent a literal backslash-n instead of a newline.
  auto r = call("patch", replace_args("e.txt", "alpha\\nbeta",
                                      "alpha\\ngamma"));
  BOOST_TEST(error_of(r) == "");
  BOOST_TEST(r.get_string("match_strategy") == "escape_normalized");
  BOOST_TEST(get("e.txt") == "alpha\ngamma\n");
}

BOOST_AUTO_TEST_CASE(escape_drift_is_refused) {
  put("q.py", "print('hi')\n");
  auto r = call("patch", replace_args("q.py", "print('hi')",
                                      "print(\\'bye\\')"));
  BOOST_TEST(contains(error_of(r), "Escape drift"));
  BOOST_TEST(get("q.py") == "print('hi')\n");
  // Escaped quotes that the file already uses are fine.
  put("s.c", "puts(\"say \\\"hi\\\"\");\n");
  r = call("patch", replace_args("s.c", "say \\\"hi\\\"", "say \\\"yo\\\""));
  BOOST_TEST(error_of(r) == "");
  BOOST_TEST(get("s.c") == "puts(\"say \\\"yo\\\"\");\n");
}

BOOST_AUTO_TEST_CASE(trimmed_boundary_match) {
  put("t.txt", "a b c\n");
  auto r = call("patch",
                replace_args("t.txt", "   b c   \n\n", "   B C   \n\n"));
  BOOST_TEST(error_of(r) == "");
  BOOST_TEST(get("t.txt") == "a B C\n");
}

BOOST_AUTO_TEST_CASE(unicode_normalized_match) {
  put("smart.md", "He said \u201chello\u201d \u2014 then left\u2026\n");
  auto r = call("patch", replace_args("smart.md",
                                      "He said \"hello\" - then left...",
                                      "He said \"bye\"."));
  BOOST_TEST(error_of(r) == "");
  BOOST_TEST(r.get_string("match_strategy") == "unicode_normalized");
  BOOST_TEST(get("smart.md") == "He said \"bye\".\n");
}

BOOST_AUTO_TEST_CASE(block_anchor_match) {
  put("blk.py", "def f(a, b):\n    total = a + b\n    return total\n\n"
                "def g():\n    pass\n");
  auto r = call("patch", replace_args("blk.py",
                                      "def f(a, b):\n    total = a+b  # sum\n"
                                      "    return total",
                                      "def f(a, b):\n    return a + b"));
  BOOST_TEST(error_of(r) == "");
  BOOST_TEST(r.get_string("match_strategy") == "block_anchor");
  BOOST_TEST(get("blk.py")
             == "def f(a, b):\n    return a + b\n\ndef g():\n    pass\n");
}

// -- replace mode: errors -----------------------------------------------------

BOOST_AUTO_TEST_CASE(no_match_names_the_path_and_the_closest_section) {
  put("n.py", "def alpha():\n    return compute_value(1)\n\nx = 3\n");
  auto r = call("patch", replace_args("n.py",
                                      "def alpha():\n    return compute_valeu"
                                      "(2, 3, 4) + other_thing",
                                      "nothing"));
  BOOST_TEST(error_of(r) == "Could not find match for old_string in "
                            + work + "/n.py");
  BOOST_TEST(r.get_bool("success", true) == false);
  BOOST_TEST(contains(r.get_string("_hint"), "Closest section (lines 1-2"));
  BOOST_TEST(contains(r.get_string("_hint"), "2|    return compute_value(1)"));
  BOOST_TEST(!contains(r.get_string("_hint"), "Stop retrying"));
  call("patch", replace_args("n.py", "zzz", "y"));
  r = call("patch", replace_args("n.py", "qqq", "y"));
  BOOST_TEST(contains(r.get_string("_hint"), "Stop retrying"));
  // A success resets the count.
  call("patch", replace_args("n.py", "x = 3", "x = 4"));
  r = call("patch", replace_args("n.py", "qqq", "y"));
  BOOST_TEST(!contains(r.get_string("_hint"), "Stop retrying"));
}

BOOST_AUTO_TEST_CASE(argument_errors_use_the_exact_messages) {
  put("a.txt", "abc\n");
  auto r = call("patch", replace_args("a.txt", "", "x"));
  BOOST_TEST(error_of(r) == "old_string cannot be empty");
  r = call("patch", replace_args("a.txt", "abc", "abc"));
  BOOST_TEST(error_of(r) == "old_string and new_string are identical");
  r = call("patch", R"({"old_string":"a","new_string":"b"})");
  BOOST_TEST(error_of(r) == "path required");
  r = call("patch", R"({"path":"","old_string":"a","new_string":"b"})");
  BOOST_TEST(error_of(r) == "path required");
  r = call("patch", R"({"path":"a.txt","old_string":"a"})");
  BOOST_TEST(error_of(r) == "old_string and new_string required");
  r = call("patch", R"({"path":"a.txt","new_string":"a"})");
  BOOST_TEST(error_of(r) == "old_string and new_string required");
  r = call("patch", R"({"mode":"rewrite","path":"a.txt"})");
  BOOST_TEST(contains(error_of(r), "Unknown mode: rewrite"));
  r = call("patch", R"({"mode":"patch"})");
  BOOST_TEST(error_of(r) == "patch content required");
  r = call("patch", R"({"mode":"patch","patch":"  \n"})");
  BOOST_TEST(error_of(r) == "patch content required");
  BOOST_TEST(get("a.txt") == "abc\n");
}

BOOST_AUTO_TEST_CASE(missing_file_directory_and_binary_are_refused) {
  put("present.txt", "x\n");
  auto r = call("patch", replace_args("presnt.txt", "x", "y"));
  BOOST_TEST(error_of(r) == "File not found: " + work + "/presnt.txt");
  BOOST_REQUIRE(r.find("similar_files") != nullptr);
  BOOST_TEST(r.find("similar_files")->size() == 1u);
  fs::create_directories(work + "/dir");
  r = call("patch", replace_args("dir", "x", "y"));
  BOOST_TEST(contains(error_of(r), "directory"));
  put("bin.dat", std::string("ab\0cd", 5));
  r = call("patch", replace_args("bin.dat", "ab", "xy"));
  BOOST_TEST(contains(error_of(r), "Binary"));
}

BOOST_AUTO_TEST_CASE(sensitive_files_are_refused) {
  dir.write("home/.mibyan/config.yaml", "a: 1\n");
  auto r = call("patch", replace_args("~/.mibyan/config.yaml", "a: 1", "a: 2"));
  BOOST_TEST(contains(error_of(r), "Refusing"));
  BOOST_TEST(slurp(mibyan_home + "/config.yaml") == "a: 1\n");
  dir.write("home/.ssh/config", "Host x\n");
  r = call("patch", replace_args("~/.ssh/config", "Host x", "Host y"));
  BOOST_TEST(contains(error_of(r), "Access denied"));
}

// Issue 14 item 9: patch must not edit the real .env behind a symlinked
// $MIBYAN_HOME, nor a hard link to it, in either patch mode.
BOOST_AUTO_TEST_CASE(secrets_behind_links_are_refused) {
  auto real = dir / "real-home";
  fs::create_directories(real);
  dir.write("real-home/.env", "OPENAI_API_KEY=sk-secret\n");
  auto link = dir / "link-home";
  fs::create_symlink(real, link);
  auto c = ctx;
  c.home = link;
  auto r = call_with(c, "patch", replace_args(real + "/.env", "sk-secret",
                                              "sk-evil"));
  BOOST_TEST(contains(error_of(r), "Access denied"));
  BOOST_TEST(slurp(real + "/.env") == "OPENAI_API_KEY=sk-secret\n");
  BOOST_REQUIRE(::link((real + "/.env").c_str(), (work + "/h.txt").c_str())
                == 0);
  auto text = std::string{"*** Begin Patch\n*** Update File: h.txt\n"
                          "-OPENAI_API_KEY=sk-secret\n"
                          "+OPENAI_API_KEY=sk-evil\n*** End Patch\n"};
  r = call_with(c, "patch", obj({{"mode", "patch"}, {"patch", text}}));
  BOOST_TEST(contains(error_of(r), "Access denied"));
  BOOST_TEST(!contains(r.dump(), "sk-secret"));
  BOOST_TEST(slurp(real + "/.env") == "OPENAI_API_KEY=sk-secret\n");
}

BOOST_AUTO_TEST_CASE(json_lint_delta_is_reported) {
  put("p.json", "{\"a\": 1, \"b\": 2}\n");
  auto r = call("patch", replace_args("p.json", "\"b\": 2", "\"b\": "));
  BOOST_TEST(r.get_bool("success", false) == true);
  BOOST_REQUIRE(r.find("lint") != nullptr);
  BOOST_TEST(r.find("lint")->get_string("status") == "error");
  r = call("patch", replace_args("p.json", "\"b\": ", "\"b\": 3"));
  BOOST_TEST(r.find("lint") == nullptr);
}

BOOST_AUTO_TEST_CASE(bad_arguments_of_every_shape) {
  put("a.txt", "abc\n");
  auto r = call("patch", R"({"path":5,"old_string":"a","new_string":"b"})");
  BOOST_TEST(contains(error_of(r), "'path'"));
  r = call("patch", R"({"path":"a.txt","old_string":1,"new_string":"b"})");
  BOOST_TEST(contains(error_of(r), "'old_string'"));
  r = call("patch", R"({"path":"a.txt","old_string":"a","new_string":"b",
                        "replace_all":"yes"})");
  BOOST_TEST(contains(error_of(r), "'replace_all'"));
  r = call("patch", R"({"mode":7})");
  BOOST_TEST(contains(error_of(r), "'mode'"));
  r = call("patch", R"([])");
  BOOST_TEST(error_of(r) == "Invalid tool arguments");
  r = call("patch", R"(null)");
  BOOST_TEST(error_of(r) == "Invalid tool arguments");
  r = call("patch", R"({})");
  BOOST_TEST(error_of(r) == "path required");
  // A 10 MB old_string that does not occur fails quickly and cleanly.
  auto start = std::chrono::steady_clock::now();
  r = call("patch", replace_args("a.txt", std::string(10 << 20, 'q'), "x"));
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
              std::chrono::steady_clock::now() - start)
              .count();
  BOOST_TEST(contains(error_of(r), "Could not find match"));
  BOOST_TEST(ms < 10000);
  // A 10 MB new_string is written.
  r = call("patch", replace_args("a.txt", "abc", std::string(10 << 20, 'n')));
  BOOST_TEST(r.get_bool("success", false) == true);
  BOOST_TEST(fs::file_size(work + "/a.txt") == (10u << 20) + 1);
  r = call("patch", replace_args(std::string(10 << 20, 'p'), "a", "b"));
  BOOST_TEST(contains(error_of(r), "too long"));
}

BOOST_AUTO_TEST_CASE(concurrent_patches_of_different_files) {
  for (int i = 0; i < 4; ++i)
    put("c" + std::to_string(i) + ".txt", "value = 0\n");
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([this, i] {
      auto name = "c" + std::to_string(i) + ".txt";
      for (int k = 0; k < 10; ++k)
        call("patch", replace_args(name, "value = " + std::to_string(k),
                                   "value = " + std::to_string(k + 1)));
    });
  for (auto& t : threads)
    t.join();
  for (int i = 0; i < 4; ++i)
    BOOST_TEST(get("c" + std::to_string(i) + ".txt") == "value = 10\n");
}

// -- V4A patch mode -----------------------------------------------------------

BOOST_AUTO_TEST_CASE(v4a_updates_adds_deletes_and_moves) {
  put("src/app.py",
      "import os\n\ndef main():\n    print('hi')\n    return 0\n");
  put("old.txt", "obsolete\n");
  put("a.txt", "move me\n");
  auto text = std::string{
    "*** Begin Patch\n"
    "*** Update File: src/app.py\n"
    "@@ def main():\n"
    "-    print('hi')\n"
    "+    print('hello')\n"
    "     return 0\n"
    "*** Add File: docs/new.md\n"
    "+# New\n"
    "+text\n"
    "*** Delete File: old.txt\n"
    "*** Move File: a.txt -> b/moved.txt\n"
    "*** End Patch\n"};
  auto r = call("patch", obj({{"mode", "patch"}, {"patch", text}}));
  BOOST_TEST(error_of(r) == "");
  BOOST_TEST(r.get_bool("success", false) == true);
  BOOST_TEST(get("src/app.py")
             == "import os\n\ndef main():\n    print('hello')\n    return 0\n");
  BOOST_TEST(get("docs/new.md") == "# New\ntext\n");
  BOOST_TEST(!fs::exists(work + "/old.txt"));
  BOOST_TEST(!fs::exists(work + "/a.txt"));
  BOOST_TEST(get("b/moved.txt") == "move me\n");
  auto diff = r.get_string("diff");
  BOOST_TEST(contains(diff, "--- a/src/app.py"));
  BOOST_TEST(contains(diff, "+    print('hello')"));
  BOOST_TEST(contains(diff, "--- /dev/null\n+++ b/docs/new.md"));
  BOOST_TEST(contains(diff, "--- a/old.txt\n+++ /dev/null"));
  BOOST_TEST(r.find("files_modified")->size() == 1u);
  BOOST_TEST(r.find("files_created")->size() == 2u);
  BOOST_TEST(r.find("files_deleted")->size() == 2u);
}

BOOST_AUTO_TEST_CASE(v4a_hint_picks_between_repeated_context) {
  put("r.py", "def a():\n    x = 1\n\ndef b():\n    x = 1\n");
  auto text = std::string{
    "*** Begin Patch\n*** Update File: r.py\n@@ def b():\n"
    "-    x = 1\n+    x = 2\n*** End Patch"};
  auto r = call("patch", obj({{"mode", "patch"}, {"patch", text}}));
  BOOST_TEST(error_of(r) == "");
  BOOST_TEST(get("r.py") == "def a():\n    x = 1\n\ndef b():\n    x = 2\n");
}

BOOST_AUTO_TEST_CASE(v4a_failure_leaves_every_file_untouched) {
  put("one.txt", "1\n");
  put("two.txt", "2\n");
  auto text = std::string{
    "*** Begin Patch\n"
    "*** Update File: one.txt\n-1\n+one\n"
    "*** Update File: two.txt\n-not there\n+x\n"
    "*** End Patch\n"};
  auto r = call("patch", obj({{"mode", "patch"}, {"patch", text}}));
  BOOST_TEST(r.get_bool("success", true) == false);
  BOOST_TEST(contains(error_of(r), "two.txt"));
  BOOST_TEST(contains(error_of(r), "hunk 1"));
  BOOST_TEST(get("one.txt") == "1\n");
  BOOST_TEST(get("two.txt") == "2\n");
}

BOOST_AUTO_TEST_CASE(v4a_malformed_patches_are_rejected) {
  put("f.txt", "x\n");
  auto run = [&](const std::string& text) {
    return error_of(call("patch", obj({{"mode", "patch"}, {"patch", text}})));
  };
  BOOST_TEST(contains(run("*** Update File: f.txt\n-x\n+y\n*** End Patch"),
                      "Begin Patch"));
  BOOST_TEST(contains(run("*** Begin Patch\n*** Update File: f.txt\n-x\n+y\n"),
                      "End Patch"));
  BOOST_TEST(contains(run("*** Begin Patch\n*** Frobnicate File: f.txt\n"
                          "*** End Patch"),
                      "Unknown patch directive"));
  BOOST_TEST(contains(run("*** Begin Patch\n*** Update File: f.txt\n"
                          "?x\n*** End Patch"),
                      "must start with"));
  BOOST_TEST(contains(run("*** Begin Patch\n*** End Patch"), "no file"));
  BOOST_TEST(contains(run("*** Begin Patch\n*** Add File: f.txt\n+y\n"
                          "*** End Patch"),
                      "already exists"));
  BOOST_TEST(contains(run("*** Begin Patch\n*** Delete File: nope.txt\n"
                          "*** End Patch"),
                      "File not found"));
  BOOST_TEST(contains(run("*** Begin Patch\n*** Add File: ~/.mibyan/.env\n"
                          "+K=v\n*** End Patch"),
                      "Access denied"));
  BOOST_TEST(get("f.txt") == "x\n");
}

BOOST_AUTO_TEST_CASE(v4a_handles_crlf_patch_text_and_files) {
  put("w.txt", "a\r\nb\r\nc\r\n");
  auto text = std::string{
    "*** Begin Patch\r\n*** Update File: w.txt\r\n a\r\n-b\r\n+B\r\n"
    "*** End Patch\r\n"};
  auto r = call("patch", obj({{"mode", "patch"}, {"patch", text}}));
  BOOST_TEST(error_of(r) == "");
  BOOST_TEST(get("w.txt") == "a\r\nB\r\nc\r\n");
}

// -- unified diff -------------------------------------------------------------

BOOST_AUTO_TEST_CASE(diff_of_equal_texts_is_empty) {
  BOOST_TEST(unified_diff("a\nb\n", "a\nb\n", "a/x", "b/x") == "");
}

BOOST_AUTO_TEST_CASE(diff_marks_a_missing_final_newline) {
  auto d = unified_diff("a\nb", "a\nc", "a/x", "b/x");
  BOOST_TEST(d == "--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n a\n-b\n"
                  "\\ No newline at end of file\n+c\n"
                  "\\ No newline at end of file\n");
}

BOOST_AUTO_TEST_CASE(diff_of_new_and_deleted_files) {
  BOOST_TEST(unified_diff("", "x\ny\n", "/dev/null", "b/f")
             == "--- /dev/null\n+++ b/f\n@@ -0,0 +1,2 @@\n+x\n+y\n");
  BOOST_TEST(unified_diff("x\n", "", "a/f", "/dev/null")
             == "--- a/f\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n");
}

BOOST_AUTO_TEST_CASE(diff_splits_distant_changes_into_hunks) {
  std::string before;
  for (int i = 1; i <= 30; ++i)
    before += "l" + std::to_string(i) + "\n";
  auto after = before;
  after.replace(after.find("l2\n"), 3, "L2\n");
  after.replace(after.find("l25\n"), 4, "L25\n");
  auto d = unified_diff(before, after, "a/f", "b/f");
  BOOST_TEST(contains(d, "@@ -1,5 +1,5 @@\n l1\n-l2\n+L2\n"));
  BOOST_TEST(contains(d, "@@ -22,7 +22,7 @@\n"));
  BOOST_TEST(apply_with_gnu_patch(dir, before, d) == after);
}

BOOST_AUTO_TEST_CASE(random_diffs_apply_cleanly_with_gnu_patch) {
  std::mt19937 rng{12345};
  for (int round = 0; round < 40; ++round) {
    std::vector<std::string> lines;
    int n = 1 + static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i)
      lines.push_back("w" + std::to_string(rng() % 6) + "\n");
    std::string before;
    for (auto& l : lines)
      before += l;
    auto edited = lines;
    int edits = 1 + static_cast<int>(rng() % 6);
    for (int e = 0; e < edits; ++e) {
      auto pos = edited.empty() ? 0 : rng() % (edited.size() + 1);
      switch (rng() % 3) {
        case 0:
          edited.insert(edited.begin() + static_cast<long>(pos),
                        "new" + std::to_string(rng() % 4) + "\n");
          break;
        case 1:
          if (pos < edited.size())
            edited.erase(edited.begin() + static_cast<long>(pos));
          break;
        default:
          if (pos < edited.size())
            edited[pos] = "chg" + std::to_string(rng() % 4) + "\n";
      }
    }
    std::string after;
    for (auto& l : edited)
      after += l;
    if (rng() % 4 == 0 && !after.empty())
      after.pop_back(); // drop the final newline sometimes
    auto d = unified_diff(before, after, "a/f", "b/f");
    if (before == after) {
      BOOST_TEST(d == "");
      continue;
    }
    BOOST_TEST(apply_with_gnu_patch(dir, before, d) == after,
               "round " << round << " diff:\n" << d);
  }
}

BOOST_AUTO_TEST_CASE(diff_falls_back_when_too_many_edits) {
  std::string before;
  std::string after;
  for (int i = 0; i < 200; ++i) {
    before += "a" + std::to_string(i) + "\n";
    after += "b" + std::to_string(i) + "\n";
  }
  auto d = unified_diff(before, after, "a/f", "b/f", 3, 10);
  BOOST_TEST(contains(d, "@@ -1,200 +1,200 @@"));
  BOOST_TEST(apply_with_gnu_patch(dir, before, d) == after);
}

// -- matcher unit checks ------------------------------------------------------

BOOST_AUTO_TEST_CASE(fuzzy_matcher_does_not_match_blank_only_text) {
  auto r = fuzzy_replace("a\n\n\nb\n", "   \n", "x", false);
  BOOST_TEST(r.error != "");
  BOOST_TEST(r.not_found == true);
}

BOOST_AUTO_TEST_CASE(tool_metadata) {
  auto t = reg.find("patch");
  BOOST_REQUIRE(t != nullptr);
  BOOST_TEST(std::string{t->toolset()} == "file");
  BOOST_TEST(!t->parallel_safe());
  auto s = t->schema();
  for (auto p : {"mode", "path", "old_string", "new_string", "patch"})
    BOOST_TEST(s["properties"][p].get_string("type") == "string");
  BOOST_TEST(s["properties"]["replace_all"].get_string("type") == "boolean");
  BOOST_TEST(contains(t->description(), "*** Begin Patch"));
}

BOOST_AUTO_TEST_SUITE_END()
