#define BOOST_TEST_MODULE checkpoints_cli
#include "tests/support/paths.hpp"
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <sys/stat.h>

#include "base/json.hpp"
#include "storage/session_store.hpp"
#include "tests/support/http_server.hpp"
#include "tests/support/cli_child.hpp"
#include "tests/support/process.hpp"
#include "tests/support/scratch_mounts.hpp"
#include "tests/support/scripted_replies.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mibyan;
namespace fs = std::filesystem;

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

using test::completion;

std::string args_json(std::initializer_list<std::pair<const char*, std::string>> kv) {
  json::value o;
  for (auto& [k, v] : kv)
    o[k] = v;
  return o.dump();
}

std::map<std::string, std::string> tree_of(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (auto& e : fs::recursive_directory_iterator(dir)) {
    struct stat st;
    ::lstat(e.path().c_str(), &st);
    out[fs::relative(e.path(), dir).string()]
      = std::to_string(st.st_mode) + ":"
        + (S_ISREG(st.st_mode) ? test::slurp(e.path().string()) : "");
  }
  return out;
}

constexpr const char* marker = "[Mibyan rollback]";

struct fixture {
  test::http_server server;
  test::temp_dir home;
  test::temp_dir proj_dir;
  std::string proj;

  fixture() { proj = fs::canonical(proj_dir.path()).string(); }

  test::process_options env(const std::string& input = {}) {
    auto o = test::cli_options(home.path(), 60);
    o.cwd = proj;
    o.input = input;
    return o;
  }

  void script(const std::string& body) {
    json::value s;
    s["path"] = "/v1/chat/completions";
    s["status"] = 200;
    s["body"] = body;
    server.script(s.dump());
  }

  std::vector<std::string> agent(const std::string& command) {
    return {command, "--provider", "custom", "--base-url", server.url("/v1"),
            "--model", "m"};
  }

  test::process_result run(const std::string& prompt,
                           const std::string& session,
                           bool checkpoints = true) {
    auto a = agent("run");
    if (checkpoints)
      a.push_back("--checkpoints");
    a.insert(a.end(), {"--session", session, prompt});
    return test::run_mibyan(a, env());
  }

  test::process_result cp(std::vector<std::string> a) {
    a.insert(a.begin(), "checkpoints");
    return test::run_mibyan(a, env());
  }

  json::value listed() {
    auto r = cp({"list", "--json"});
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    auto parsed = json::parse(r.out);
    BOOST_REQUIRE(parsed);
    return *parsed.v;
  }

  std::vector<json::value> requests() { return test::request_bodies(server); }

  std::vector<stored_message> messages(const std::string& sid) {
    session_store_options so;
    so.dir = session_store::default_dir(home.path());
    so.read_only = true;
    auto st = session_store::open(so);
    BOOST_REQUIRE_MESSAGE(st, st.error);
    auto msgs = (*st)->load_messages(sid);
    BOOST_REQUIRE_MESSAGE(msgs, msgs.error);
    return *msgs;
  }

  // The content of the last user message of request `i`.
  std::string last_user(size_t i) {
    auto reqs = requests();
    BOOST_REQUIRE_LT(i, reqs.size());
    std::string out;
    for (auto& m : reqs[i].find("messages")->as_array())
      if (m.get_string("role") == "user")
        out = m.get_string("content");
    return out;
  }

  // The content of the last tool message of request `i`.
  std::string last_tool(size_t i) {
    auto reqs = requests();
    BOOST_REQUIRE_LT(i, reqs.size());
    std::string out;
    for (auto& m : reqs[i].find("messages")->as_array())
      if (m.get_string("role") == "tool")
        out = m.get_string("content");
    return out;
  }

  void git(std::vector<std::string> a) {
    a.insert(a.begin(), {"git", "-C", proj});
    test::process_options o;
    o.env["GIT_AUTHOR_NAME"] = o.env["GIT_COMMITTER_NAME"] = "t";
    o.env["GIT_AUTHOR_EMAIL"] = o.env["GIT_COMMITTER_EMAIL"] = "t@t";
    auto r = test::run_process(a, o);
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(checkpoints_cli, fixture)

BOOST_AUTO_TEST_CASE(a_patch_is_rolled_back_and_the_users_edit_kept) {
  // The project is a git repository with uncommitted changes: its .git
  // stays byte for byte the same through the turn and the rollback.
  proj_dir.write("a.txt", "alpha\n");
  proj_dir.write("b.txt", "beta\n");
  git({"init", "-q"});
  git({"add", "."});
  git({"commit", "-qm", "init"});
  proj_dir.write("b.txt", "beta uncommitted\n");
  auto dot_git = tree_of(proj + "/.git");
  script(completion("", "patch",
                    args_json({{"path", "a.txt"},
                               {"old_string", "alpha"},
                               {"new_string", "ALPHA"}})));
  script(completion("edited"));
  auto r = run("change alpha", "s1");
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  BOOST_TEST(proj_dir.read("a.txt") == "ALPHA\n");
  BOOST_TEST(!contains(last_tool(1), "_checkpoint_warning"), last_tool(1));
  // The user edits another file afterwards.
  proj_dir.write("b.txt", "beta by the user\n");
  auto l = listed();
  BOOST_REQUIRE_EQUAL(l.size(), 1u);
  auto& c = l.as_array()[0];
  BOOST_TEST(c.get_int("number", 0) == 1);
  BOOST_TEST(c.get_string("tool") == "patch");
  BOOST_TEST(c.get_string("session_id") == "s1");
  BOOST_TEST(c.get_int("turn", 0) == 1);
  BOOST_TEST(c.get_string("project") == proj);
  BOOST_TEST(c.find("agent_files")->dump() == "[\"a.txt\"]");
  auto d = cp({"diff", "1"});
  BOOST_REQUIRE_MESSAGE(d.exit_code == 0, d.err);
  BOOST_TEST(contains(d.out, "-alpha"), d.out);
  BOOST_TEST(contains(d.out, "+ALPHA"), d.out);
  BOOST_TEST(contains(d.out, "+beta by the user"), d.out);
  auto rs = cp({"restore", "1"});
  BOOST_REQUIRE_MESSAGE(rs.exit_code == 0, rs.err + rs.out);
  BOOST_TEST(contains(rs.out, "restored a.txt"), rs.out);
  BOOST_TEST(contains(rs.out, "kept     b.txt"), rs.out);
  BOOST_TEST(proj_dir.read("a.txt") == "alpha\n");
  BOOST_TEST(proj_dir.read("b.txt") == "beta by the user\n");
  // The session is marked: its last message is the marker, which the
  // history shows and the next request carries.
  auto msgs = messages("s1");
  BOOST_REQUIRE(!msgs.empty());
  BOOST_TEST(msgs.back().message.role == "user");
  BOOST_TEST(msgs.back().message.content.rfind(marker, 0) == 0u);
  BOOST_TEST(contains(msgs.back().message.content, "a.txt"));
  auto shown = test::run_mibyan({"sessions", "show", "s1"}, env());
  BOOST_TEST(contains(shown.out, marker), shown.out);
  script(completion("noted"));
  r = run("what now?", "s1");
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  auto u = last_user(2);
  BOOST_TEST(contains(u, marker), u);
  BOOST_TEST(contains(u, "what now?"), u);
  BOOST_TEST((tree_of(proj + "/.git") == dot_git),
             "the project's .git changed");
  // The list shows it rolled back, and the unknown number is an error.
  BOOST_TEST(listed().as_array()[0].get_bool("rolled_back", false));
  auto bad = cp({"restore", "42"});
  BOOST_TEST(bad.exit_code == 2);
  BOOST_TEST(contains(bad.err, "no checkpoint 42"), bad.err);
}

BOOST_AUTO_TEST_CASE(writes_of_one_turn_share_one_checkpoint) {
  proj_dir.write("a.txt", "a0\n");
  proj_dir.write("b.txt", "b0\n");
  test::temp_dir other;
  auto other_path = fs::canonical(other.path()).string();
  other.write("o.txt", "o0\n");
  // Three writes in one turn, two of them in this project and one in
  // another directory: one checkpoint per project.
  script(completion("", "write_file",
                    args_json({{"path", "a.txt"}, {"content", "a1\n"}})));
  script(completion("", "patch",
                    args_json({{"path", "b.txt"},
                               {"old_string", "b0"},
                               {"new_string", "b1"}})));
  script(completion("", "write_file",
                    args_json({{"path", other_path + "/o.txt"},
                               {"content", "o1\n"}})));
  script(completion("done"));
  auto r = run("three writes", "s7");
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  BOOST_TEST(proj_dir.read("b.txt") == "b1\n");
  auto l = listed();
  BOOST_REQUIRE_EQUAL(l.size(), 1u);
  BOOST_TEST(l.as_array()[0].find("agent_files")->dump()
             == "[\"a.txt\",\"b.txt\"]");
  auto all = cp({"list", "--all-projects", "--json"});
  BOOST_REQUIRE_MESSAGE(all.exit_code == 0, all.err);
  BOOST_TEST(contains(all.out, other_path), all.out);
  // Undoing the session's last turn restores both projects.
  auto rs = cp({"restore", "--session", "s7"});
  BOOST_REQUIRE_MESSAGE(rs.exit_code == 0, rs.err);
  BOOST_TEST(proj_dir.read("a.txt") == "a0\n");
  BOOST_TEST(proj_dir.read("b.txt") == "b0\n");
  BOOST_TEST(other.read("o.txt") == "o0\n");
}

BOOST_AUTO_TEST_CASE(restore_all_and_one_file) {
  proj_dir.write("a.txt", "a0\n");
  proj_dir.write("b.txt", "b0\n");
  proj_dir.write("sub/c.txt", "c0\n");
  script(completion("", "write_file",
                    args_json({{"path", "a.txt"}, {"content", "a1\n"}})));
  script(completion("written"));
  auto r = run("rewrite a", "s2");
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  BOOST_TEST(proj_dir.read("a.txt") == "a1\n");
  proj_dir.write("b.txt", "b-user\n");
  proj_dir.write("sub/c.txt", "c-user\n");
  // --file: that file only, whoever changed it.
  auto one = cp({"restore", "1", "--file", "sub/c.txt"});
  BOOST_REQUIRE_MESSAGE(one.exit_code == 0, one.err);
  BOOST_TEST(proj_dir.read("sub/c.txt") == "c0\n");
  BOOST_TEST(proj_dir.read("a.txt") == "a1\n");
  BOOST_TEST(proj_dir.read("b.txt") == "b-user\n");
  // --all: every file of the checkpoint.
  auto all = cp({"restore", "1", "--all"});
  BOOST_REQUIRE_MESSAGE(all.exit_code == 0, all.err);
  BOOST_TEST(proj_dir.read("a.txt") == "a0\n");
  BOOST_TEST(proj_dir.read("b.txt") == "b0\n");
  // Each restore left a safety checkpoint: the state before --all is
  // still there.
  auto l = listed();
  BOOST_TEST(l.size() == 3u);
  BOOST_TEST(l.as_array()[2].get_string("tool") == "restore");
  auto back = cp({"restore", "3", "--all"});
  BOOST_REQUIRE_MESSAGE(back.exit_code == 0, back.err);
  BOOST_TEST(proj_dir.read("b.txt") == "b-user\n");
  BOOST_TEST(proj_dir.read("a.txt") == "a1\n");
  auto outside = cp({"restore", "1", "--file", "/etc/hostname"});
  BOOST_TEST(outside.exit_code == 2);
}

BOOST_AUTO_TEST_CASE(a_destructive_command_is_snapshotted_first) {
  proj_dir.write("keep.txt", "keep\n");
  proj_dir.write("c.txt", "precious\n");
  // A harmless command takes no checkpoint.
  script(completion("", "terminal", args_json({{"command", "ls"}})));
  script(completion("listed"));
  auto r = run("list", "s3");
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  BOOST_TEST(listed().size() == 0u);
  script(completion("", "terminal", args_json({{"command", "rm c.txt"}})));
  script(completion("removed"));
  r = run("remove c", "s3");
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  BOOST_TEST(!fs::exists(proj + "/c.txt"));
  auto l = listed();
  BOOST_REQUIRE_EQUAL(l.size(), 1u);
  auto& c = l.as_array()[0];
  BOOST_TEST(c.get_string("tool") == "terminal");
  BOOST_TEST(c.get_string("reason") == "rm");
  BOOST_TEST(c.get_int("turn", 0) == 2);
  BOOST_TEST(c.find("agent_files")->dump() == "[\"c.txt\"]");
  auto rs = cp({"restore", "--session", "s3"});
  BOOST_REQUIRE_MESSAGE(rs.exit_code == 0, rs.err);
  BOOST_TEST(proj_dir.read("c.txt") == "precious\n");
  // Nothing left to undo in that session.
  auto again = cp({"restore", "--session", "s3"});
  BOOST_TEST(again.exit_code == 2);
}

BOOST_AUTO_TEST_CASE(checkpoints_are_pruned_by_count) {
  home.write("config.yaml", "checkpoints:\n  keep: 2\n");
  for (int i = 0; i < 3; ++i) {
    script(completion("", "write_file",
                      args_json({{"path", "f.txt"},
                                 {"content", "v" + std::to_string(i)}})));
    script(completion("ok"));
    auto r = run("write", "s4");
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  }
  auto l = listed();
  BOOST_REQUIRE_EQUAL(l.size(), 2u);
  BOOST_TEST(l.as_array()[0].get_int("number", 0) == 2);
  BOOST_TEST(l.as_array()[1].get_int("number", 0) == 3);
  // Without --checkpoints (and the key off) nothing is taken.
  script(completion("", "write_file",
                    args_json({{"path", "f.txt"}, {"content", "v9"}})));
  script(completion("ok"));
  auto r = run("write", "s4", false);
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  BOOST_TEST(listed().size() == 2u);
}

BOOST_AUTO_TEST_CASE(chat_rollback_undoes_the_last_turn) {
  proj_dir.write("a.txt", "alpha\n");
  proj_dir.write("b.txt", "beta\n");
  script(completion("", "patch",
                    args_json({{"path", "a.txt"},
                               {"old_string", "alpha"},
                               {"new_string", "ALPHA"}})));
  script(completion("edited"));
  script(completion("fine"));
  auto a = agent("chat");
  a.insert(a.end(), {"--checkpoints", "--session", "c1"});
  auto r = test::run_mibyan(a, env("change alpha\n/rollback\nand now?\n"));
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  BOOST_TEST(contains(r.out, "restored a.txt"), r.out);
  BOOST_TEST(contains(r.out, "marked as undone"), r.out);
  BOOST_TEST(proj_dir.read("a.txt") == "alpha\n");
  BOOST_REQUIRE_EQUAL(requests().size(), 3u);
  auto u = last_user(2);
  BOOST_TEST(contains(u, marker), u);
  BOOST_TEST(contains(u, "and now?"), u);
  auto msgs = messages("c1");
  size_t markers = 0;
  for (auto& m : msgs)
    markers += m.message.content.rfind(marker, 0) == 0 ? 1 : 0;
  BOOST_TEST(markers == 1u);
  // A second /rollback has nothing left; a bad argument is refused.
  r = test::run_mibyan(a, env("/rollback\n/rollback x\n"));
  BOOST_TEST(contains(r.err, "no checkpoint to roll back"), r.err);
  BOOST_TEST(contains(r.err, "usage: /rollback"), r.err);
}

BOOST_AUTO_TEST_CASE(chat_rollback_to_a_numbered_checkpoint_with_all) {
  proj_dir.write("a.txt", "alpha\n");
  proj_dir.write("b.txt", "beta\n");
  script(completion("", "patch",
                    args_json({{"path", "a.txt"},
                               {"old_string", "alpha"},
                               {"new_string", "ALPHA"}})));
  script(completion("edited"));
  auto a = agent("chat");
  a.insert(a.end(), {"--checkpoints", "--session", "c2"});
  auto r = test::run_mibyan(a, env("change alpha\n"));
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  BOOST_TEST(proj_dir.read("a.txt") == "ALPHA\n");
  proj_dir.write("b.txt", "beta by the user\n");
  // A resumed chat rolls back checkpoint 1 with --all: the user's edit
  // goes too. No model call is made.
  r = test::run_mibyan(a, env("/rollback 1 --all\n"));
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  BOOST_TEST(contains(r.out, "restored a.txt"), r.out);
  BOOST_TEST(contains(r.out, "restored b.txt"), r.out);
  BOOST_TEST(proj_dir.read("a.txt") == "alpha\n");
  BOOST_TEST(proj_dir.read("b.txt") == "beta\n");
  BOOST_TEST(requests().size() == 2u);
  auto msgs = messages("c2");
  BOOST_REQUIRE(!msgs.empty());
  BOOST_TEST(msgs.back().message.content.rfind(marker, 0) == 0u);
  r = test::run_mibyan(a, env("/rollback 7\n"));
  BOOST_TEST(contains(r.err, "no checkpoint 7"), r.err);
}

BOOST_AUTO_TEST_CASE(a_full_checkpoint_disk_warns_or_blocks) {
  fs::create_directories(home / "checkpoints");
  test::tmpfs_mount tiny{home / "checkpoints", 96 * 1024};
  if (!tiny.ok()) {
    BOOST_TEST_MESSAGE("skipped: " << tiny.why());
    return;
  }
  auto noise = test::incompressible_bytes(1 << 20);
  proj_dir.write("noise.bin", noise);
  script(completion("", "write_file",
                    args_json({{"path", "new.txt"}, {"content", "hello"}})));
  script(completion("ok"));
  auto r = run("write", "s5");
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  // The write went ahead; the result says no checkpoint was taken.
  BOOST_TEST(proj_dir.read("new.txt") == "hello");
  auto t = last_tool(1);
  BOOST_TEST(contains(t, "_checkpoint_warning"), t);
  BOOST_TEST(contains(t, "No checkpoint was taken"), t);
  // on_failure: block refuses the write.
  home.write("config.yaml", "checkpoints:\n  on_failure: block\n");
  script(completion("", "write_file",
                    args_json({{"path", "blocked.txt"}, {"content", "no"}})));
  script(completion("ok"));
  r = run("write", "s5");
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  BOOST_TEST(!fs::exists(proj + "/blocked.txt"));
  t = last_tool(3);
  BOOST_TEST(contains(t, "on_failure is block"), t);
}

BOOST_AUTO_TEST_CASE(bad_usage_and_a_corrupt_store) {
  auto r = cp({});
  BOOST_TEST(r.exit_code == 2);
  r = cp({"diff"});
  BOOST_TEST(r.exit_code == 2);
  r = cp({"bogus"});
  BOOST_TEST(r.exit_code == 2);
  r = cp({"list"});
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(contains(r.out, "no checkpoints"), r.out);
  // A store that is not a repository: the tool call goes on with a
  // warning, the command says what to do.
  fs::remove_all(home / "checkpoints/store.git");
  fs::create_directories(home / "checkpoints/store.git");
  home.write("checkpoints/store.git/HEAD", "garbage");
  script(completion("", "write_file",
                    args_json({{"path", "x.txt"}, {"content", "x"}})));
  script(completion("ok"));
  r = run("write", "s6");
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  BOOST_TEST(proj_dir.read("x.txt") == "x");
  auto t = last_tool(1);
  BOOST_TEST(contains(t, "damaged"), t);
  r = cp({"list"});
  BOOST_TEST(r.exit_code == 1);
  BOOST_TEST(contains(r.err, "move"), r.err);
}

BOOST_AUTO_TEST_SUITE_END()
