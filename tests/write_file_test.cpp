#define BOOST_TEST_MODULE write_file
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <filesystem>
#include <thread>

#include <sys/stat.h>
#include <unistd.h>

#include "tests/support/file_tool_fixture.hpp"

using namespace mibyan;
using mibyan::test::error_of;
using mibyan::test::obj;
using mibyan::test::slurp;
namespace fs = std::filesystem;

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

mode_t mode_of(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return 0;
  return st.st_mode & 07777;
}

mode_t current_umask() {
  auto m = ::umask(0);
  ::umask(m);
  return m;
}

// Names in `dir` that look like leftover temporary files.
int temp_leftovers(const std::string& dir) {
  int n = 0;
  for (auto& e : fs::directory_iterator(dir))
    if (contains(e.path().filename().string(), ".mibyan-tmp-"))
      ++n;
  return n;
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(write_file, mibyan::test::file_tool_fixture)

// -- normal use ---------------------------------------------------------------

BOOST_AUTO_TEST_CASE(creates_a_file_and_its_parent_directories) {
  auto r = call("write_file", R"({"path":"a/b/c.txt","content":"hello\n"})");
  BOOST_TEST(error_of(r) == "");
  BOOST_TEST(get("a/b/c.txt") == "hello\n");
  BOOST_TEST(r.get_int("bytes_written", -1) == 6);
  BOOST_TEST(r.get_int("dirs_created", -1) == 2);
  BOOST_TEST(r.get_string("resolved_path") == work + "/a/b/c.txt");
  auto mod = r.find("files_modified");
  BOOST_REQUIRE(mod != nullptr);
  BOOST_REQUIRE(mod->size() == 1u);
  BOOST_TEST(mod->as_array()[0].as_string() == work + "/a/b/c.txt");
  BOOST_TEST(r.find("lint") == nullptr);
  BOOST_TEST(temp_leftovers(work + "/a/b") == 0);
}

BOOST_AUTO_TEST_CASE(overwrites_and_keeps_the_file_mode) {
  auto p = put("run.sh", "#!/bin/sh\necho old\n");
  ::chmod(p.c_str(), 0750);
  auto r = call("write_file",
                R"({"path":"run.sh","content":"#!/bin/sh\necho new\n"})");
  BOOST_TEST(error_of(r) == "");
  BOOST_TEST(r.get_int("dirs_created", -1) == 0);
  BOOST_TEST(get("run.sh") == "#!/bin/sh\necho new\n");
  BOOST_TEST(mode_of(p) == 0750u);
}

BOOST_AUTO_TEST_CASE(new_files_get_the_umask_mode) {
  auto r = call("write_file", R"({"path":"fresh.txt","content":"x"})");
  BOOST_TEST(error_of(r) == "");
  BOOST_TEST(mode_of(work + "/fresh.txt") == (0666u & ~current_umask()));
}

BOOST_AUTO_TEST_CASE(empty_content_makes_an_empty_file) {
  put("e.txt", "something");
  auto r = call("write_file", R"({"path":"e.txt","content":""})");
  BOOST_TEST(error_of(r) == "");
  BOOST_TEST(r.get_int("bytes_written", -1) == 0);
  BOOST_TEST(fs::file_size(work + "/e.txt") == 0u);
}

BOOST_AUTO_TEST_CASE(unicode_and_binary_safe_content_round_trips) {
  std::string text = "héllo 日本語 😀\r\nline2\r\n";
  auto r = call("write_file", obj({{"path", "u.txt"}, {"content", text}}));
  BOOST_TEST(error_of(r) == "");
  BOOST_TEST(get("u.txt") == text);
  BOOST_TEST(r.get_int("bytes_written", -1)
             == static_cast<int64_t>(text.size()));
}

BOOST_AUTO_TEST_CASE(ten_megabytes_are_written_whole) {
  std::string big(10 << 20, 'z');
  auto r = call("write_file", obj({{"path", "big.txt"}, {"content", big}}));
  BOOST_TEST(error_of(r) == "");
  BOOST_TEST(fs::file_size(work + "/big.txt") == big.size());
}

BOOST_AUTO_TEST_CASE(tilde_and_absolute_paths) {
  auto r = call("write_file", R"({"path":"~/docs/n.md","content":"# hi\n"})");
  BOOST_TEST(error_of(r) == "");
  BOOST_TEST(slurp(home + "/docs/n.md") == "# hi\n");
  BOOST_TEST(r.get_string("resolved_path") == home + "/docs/n.md");
  r = call("write_file", obj({{"path", work + "/x/../abs.txt"},
                              {"content", "a"}}));
  BOOST_TEST(r.get_string("resolved_path") == work + "/abs.txt");
  BOOST_TEST(get("abs.txt") == "a");
}

BOOST_AUTO_TEST_CASE(writing_through_a_symlink_keeps_the_link) {
  put("real.txt", "old");
  fs::create_symlink(work + "/real.txt", work + "/link.txt");
  auto r = call("write_file", R"({"path":"link.txt","content":"new"})");
  BOOST_TEST(error_of(r) == "");
  BOOST_TEST(fs::is_symlink(work + "/link.txt"));
  BOOST_TEST(get("real.txt") == "new");
}

BOOST_AUTO_TEST_CASE(concurrent_writes_leave_one_complete_file) {
  const std::string a(1 << 20, 'a');
  const std::string b(1 << 20, 'b');
  std::atomic<bool> stop{false};
  std::atomic<int> torn{0};
  std::atomic<int> failures{0};
  put("race.txt", a);
  std::thread reader([&] {
    while (!stop) {
      auto s = slurp(work + "/race.txt");
      if (s != a && s != b)
        ++torn;
    }
  });
  auto writer = [&](const std::string& content) {
    for (int i = 0; i < 15; ++i) {
      auto r = call("write_file",
                    obj({{"path", "race.txt"}, {"content", content}}));
      if (!error_of(r).empty())
        ++failures;
    }
  };
  std::thread w1(writer, std::cref(a));
  std::thread w2(writer, std::cref(b));
  w1.join();
  w2.join();
  stop = true;
  reader.join();
  BOOST_TEST(failures.load() == 0);
  BOOST_TEST(torn.load() == 0);
  auto final = get("race.txt");
  BOOST_TEST((final == a || final == b));
  BOOST_TEST(temp_leftovers(work) == 0);
}

BOOST_AUTO_TEST_CASE(json_lint_reports_only_new_errors) {
  auto r = call("write_file", R"({"path":"c.json","content":"{\"a\": 1}"})");
  BOOST_TEST(r.find("lint") == nullptr);
  r = call("write_file", R"({"path":"c.json","content":"{\"a\": 1,"})");
  BOOST_REQUIRE(r.find("lint") != nullptr);
  BOOST_TEST((*r.find("lint")).get_string("status") == "error");
  BOOST_TEST(contains((*r.find("lint")).get_string("output"), "JSON"));
  BOOST_TEST(get("c.json") == "{\"a\": 1,"); // still written
  // Already broken before: no new error, no report.
  r = call("write_file", R"({"path":"c.json","content":"{oops"})");
  BOOST_TEST(r.find("lint") == nullptr);
  // YAML too.
  r = call("write_file", R"({"path":"d.yaml","content":"a: [1, 2\n"})");
  BOOST_REQUIRE(r.find("lint") != nullptr);
  r = call("write_file", R"({"path":"ok.yaml","content":"a: 1\n"})");
  BOOST_TEST(r.find("lint") == nullptr);
}

// -- error paths --------------------------------------------------------------

BOOST_AUTO_TEST_CASE(missing_content_gets_an_explicit_message) {
  auto r = call("write_file", R"({"path":"x.txt"})");
  BOOST_TEST(contains(error_of(r), "'content'"));
  BOOST_TEST(contains(error_of(r), "cut off"));
  BOOST_TEST(!fs::exists(work + "/x.txt"));
  r = call("write_file", R"({"path":"x.txt","content":null})");
  BOOST_TEST(contains(error_of(r), "cut off"));
}

BOOST_AUTO_TEST_CASE(directory_targets_are_refused) {
  fs::create_directories(work + "/adir");
  auto r = call("write_file", R"({"path":"adir","content":"x"})");
  BOOST_TEST(contains(error_of(r), "directory"));
  BOOST_TEST(fs::is_directory(work + "/adir"));
  r = call("write_file", R"({"path":"adir/","content":"x"})");
  BOOST_TEST(contains(error_of(r), "directory"));
}

BOOST_AUTO_TEST_CASE(a_file_in_the_parent_chain_is_refused) {
  put("plain.txt", "I am a file");
  auto r = call("write_file",
                R"({"path":"plain.txt/child.txt","content":"x"})");
  BOOST_TEST(contains(error_of(r), "not a directory"));
  r = call("write_file",
           R"({"path":"plain.txt/deeper/child.txt","content":"x"})");
  BOOST_TEST(contains(error_of(r), "not a directory"));
  BOOST_TEST(get("plain.txt") == "I am a file");
}

BOOST_AUTO_TEST_CASE(sensitive_paths_are_refused) {
  dir.write("home/.mibyan/config.yaml", "model: {}\n");
  auto r = call("write_file",
                R"({"path":"~/.mibyan/config.yaml","content":"x"})");
  BOOST_TEST(contains(error_of(r), "Refusing"));
  BOOST_TEST(slurp(mibyan_home + "/config.yaml") == "model: {}\n");
  r = call("write_file", R"({"path":"~/.mibyan/.env","content":"K=v"})");
  BOOST_TEST(contains(error_of(r), "Access denied"));
  BOOST_TEST(!fs::exists(mibyan_home + "/.env"));
  r = call("write_file",
           R"({"path":"~/.ssh/authorized_keys","content":"ssh-rsa evil"})");
  BOOST_TEST(contains(error_of(r), "Access denied"));
  BOOST_TEST(!fs::exists(home + "/.ssh"));
  r = call("write_file", R"({"path":"~/.aws/credentials","content":"x"})");
  BOOST_TEST(contains(error_of(r), "Access denied"));
}

BOOST_AUTO_TEST_CASE(symlinks_to_sensitive_paths_are_refused) {
  dir.write("home/.mibyan/config.yaml", "model: {}\n");
  fs::create_symlink(mibyan_home + "/config.yaml", work + "/cfg.yaml");
  auto r = call("write_file", R"({"path":"cfg.yaml","content":"x"})");
  BOOST_TEST(contains(error_of(r), "Refusing"));
  BOOST_TEST(slurp(mibyan_home + "/config.yaml") == "model: {}\n");
  fs::create_directories(home + "/.ssh");
  fs::create_directory_symlink(home + "/.ssh", work + "/keys");
  r = call("write_file", R"({"path":"keys/authorized_keys","content":"x"})");
  BOOST_TEST(contains(error_of(r), "Access denied"));
}

// Issue 14 item 9: a symlinked $MIBYAN_HOME must not let write_file turn on
// allow_private_urls in the real config.yaml.
BOOST_AUTO_TEST_CASE(config_behind_a_symlinked_home_is_refused) {
  auto real = dir / "real-home";
  fs::create_directories(real);
  dir.write("real-home/config.yaml", "model: {}\n");
  auto link = dir / "link-home";
  fs::create_symlink(real, link);
  auto c = ctx;
  c.home = link;
  auto r = call_with(c, "write_file",
                     obj({{"path", real + "/config.yaml"},
                          {"content", "security:\n  allow_private_urls: true\n"}}));
  BOOST_TEST(contains(error_of(r), "Refusing"));
  BOOST_TEST(slurp(real + "/config.yaml") == "model: {}\n");
  r = call_with(c, "write_file",
                obj({{"path", real + "/.env"}, {"content", "K=v"}}));
  BOOST_TEST(contains(error_of(r), "Access denied"));
  BOOST_TEST(!fs::exists(real + "/.env"));
  // $MIBYAN_CONFIG's file is configuration too.
  auto other = put("etc/mibyan.yaml", "model: {}\n");
  ::setenv("MIBYAN_CONFIG", other.c_str(), 1);
  r = call("write_file", obj({{"path", other}, {"content", "x"}}));
  ::unsetenv("MIBYAN_CONFIG");
  BOOST_TEST(contains(error_of(r), "Refusing"));
  BOOST_TEST(slurp(other) == "model: {}\n");
  // The session store is not writable either.
  r = call("write_file", R"({"path":"~/.mibyan/sessions/data.mdb","content":"x"})");
  BOOST_TEST(contains(error_of(r), "session store"));
}

BOOST_AUTO_TEST_CASE(other_profiles_need_cross_profile) {
  auto target = mibyan_home + "/profiles/work/notes.md";
  auto r = call("write_file", obj({{"path", target}, {"content", "x"}}));
  BOOST_TEST(contains(error_of(r), "cross_profile"));
  BOOST_TEST(!fs::exists(target));
  r = call("write_file", obj({{"path", target}, {"content", "x"},
                              {"cross_profile", true}}));
  BOOST_TEST(error_of(r) == "");
  BOOST_TEST(slurp(target) == "x");
  // The active home itself is fine.
  r = call("write_file", R"({"path":"~/.mibyan/memories/m.md","content":"m"})");
  BOOST_TEST(error_of(r) == "");
}

BOOST_AUTO_TEST_CASE(a_profile_home_may_write_itself_but_not_siblings) {
  auto c = ctx;
  c.home = mibyan_home + "/profiles/work";
  fs::create_directories(c.home);
  auto r = call_with(c, "write_file",
                     obj({{"path", c.home + "/notes.md"}, {"content", "x"}}));
  BOOST_TEST(error_of(r) == "");
  r = call_with(c, "write_file",
                obj({{"path", mibyan_home + "/profiles/home/notes.md"},
                     {"content", "x"}}));
  BOOST_TEST(contains(error_of(r), "another Mibyan profile"));
  // The profile's own secrets are still refused.
  r = call_with(c, "write_file",
                obj({{"path", c.home + "/.env"}, {"content", "K=v"}}));
  BOOST_TEST(contains(error_of(r), "Access denied"));
}

BOOST_AUTO_TEST_CASE(unwritable_directory_reports_the_reason) {
  if (::geteuid() == 0)
    return; // root ignores permissions
  fs::create_directories(work + "/locked");
  ::chmod((work + "/locked").c_str(), 0500);
  auto r = call("write_file", R"({"path":"locked/f.txt","content":"x"})");
  ::chmod((work + "/locked").c_str(), 0700);
  BOOST_TEST(contains(error_of(r), "Permission denied"));
}

// -- bad arguments ------------------------------------------------------------

BOOST_AUTO_TEST_CASE(bad_arguments_of_every_shape) {
  auto r = call("write_file", R"({"path":5,"content":"x"})");
  BOOST_TEST(contains(error_of(r), "'path'"));
  r = call("write_file", R"({"path":"a.txt","content":5})");
  BOOST_TEST(contains(error_of(r), "'content'"));
  BOOST_TEST(contains(error_of(r), "expected string"));
  r = call("write_file", R"({"path":"a.txt","content":{"k":1}})");
  BOOST_TEST(contains(error_of(r), "expected string"));
  r = call("write_file", R"({"content":"x"})");
  BOOST_TEST(contains(error_of(r), "Missing required argument 'path'"));
  r = call("write_file", R"({"path":"","content":"x"})");
  BOOST_TEST(contains(error_of(r), "empty"));
  r = call("write_file", R"(["a.txt","x"])");
  BOOST_TEST(error_of(r) == "Invalid tool arguments");
  r = call("write_file", R"(42)");
  BOOST_TEST(error_of(r) == "Invalid tool arguments");
  r = call("write_file",
           R"({"path":"a.txt","content":"x","cross_profile":"maybe"})");
  BOOST_TEST(contains(error_of(r), "'cross_profile'"));
  r = call("write_file", obj({{"path", std::string(10 << 20, 'p')},
                              {"content", "x"}}));
  BOOST_TEST(contains(error_of(r), "too long"));
  r = call("write_file", obj({{"path", std::string("a\0b", 3)},
                              {"content", "x"}}));
  BOOST_TEST(contains(error_of(r), "NUL"));
  r = call("write_file", obj({{"path", std::string(300, 'n')},
                              {"content", "x"}}));
  BOOST_TEST(contains(error_of(r), "name too long"));
  BOOST_TEST(temp_leftovers(work) == 0);
}

BOOST_AUTO_TEST_CASE(tool_metadata) {
  auto t = reg.find("write_file");
  BOOST_REQUIRE(t != nullptr);
  BOOST_TEST(std::string{t->toolset()} == "file");
  BOOST_TEST(!t->parallel_safe());
  auto s = t->schema();
  BOOST_TEST(s["properties"]["content"].get_string("type") == "string");
  BOOST_TEST(s["properties"]["cross_profile"].get_string("type")
             == "boolean");
}

BOOST_AUTO_TEST_SUITE_END()
