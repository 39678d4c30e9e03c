#define BOOST_TEST_MODULE approval_cli
#include "tests/support/paths.hpp"
#include <boost/test/unit_test.hpp>

// End-to-end approval gating through the real tool path (docs/approvals.md):
// `mibyan tool`, `mibyan run` with a scripted provider, `mibyan chat` on a
// pseudo-terminal, and execute_code. Every destructive command here targets
// a canary inside a temp dir (HOME points there); nothing else is touched.

#include <chrono>
#include <csignal>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <poll.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include "approvals/approval_engine.hpp"
#include "base/json.hpp"
#include "tests/support/http_server.hpp"
#include "tests/support/scripted_replies.hpp"
#include "tests/support/cli_child.hpp"
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mibyan;
using namespace std::chrono;
namespace fs = std::filesystem;

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

size_t count_of(const std::string& s, const std::string& part) {
  size_t n = 0;
  for (auto p = s.find(part); p != std::string::npos; p = s.find(part, p + 1))
    ++n;
  return n;
}

using test::completion;

std::string terminal_args(const std::string& command) {
  json::value a;
  a["command"] = command;
  return a.dump();
}

// A pseudo-terminal session with the CLI: the child's stdin, stdout and
// stderr are the pty's slave side.
using pty_child = test::cli_pty;

struct fixture {
  test::http_server server;
  test::temp_dir home;    // MIBYAN_HOME
  test::temp_dir user;    // HOME: holds the canaries

  fixture() {
    user.write("x/canary", "alive");
    user.write("a/canary", "alive");
    user.write("b/canary", "alive");
  }

  bool alive(const std::string& rel) {
    return fs::exists(user / rel);
  }

  test::process_options env(const std::string& input = {}) {
    auto o = test::cli_options(home.path(), 90);
    o.env["HOME"] = user.path();
    o.cwd = user.path();
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

  std::vector<json::value> requests() { return test::request_bodies(server); }

  std::vector<std::string> agent_args(const std::string& command) {
    return {command, "--provider", "custom", "--base-url", server.url("/v1"),
            "--model", "m"};
  }

  std::vector<std::pair<std::string, std::string>> pty_env() {
    return {{"MIBYAN_HOME", home.path()}, {"HOME", user.path()}};
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(approval_cli, fixture)

// Hardline commands (every obfuscation that would hit this HOME) through
// `mibyan tool`: none runs, the canary survives, even with --yolo.
BOOST_AUTO_TEST_CASE(tool_hardline_keeps_the_canary) {
  std::vector<std::string> commands = {
    "rm -rf ~", "rm -rf ~/", "rm -rf ~/*", "rm -rf $HOME", "rm -rf ${HOME}",
    "rm -rf \"$HOME\"", "r''m -rf ~", "r\\m -rf ~", "rm${IFS}-rf${IFS}~",
    "$(echo rm) -rf ~", "`echo rm` -rf ~", "\"r\"m -rf ~", "rm -rf \\\n~",
    "\xef\xbd\x92\xef\xbd\x8d -rf ~", "sudo -n env X=1 rm -rf ~",
    "FOO=1 /bin/rm -rf ~", "{ rm -rf ~; }", "bash -c 'rm -rf ~'",
    "rm -rf " + user.path(), "rm -rf " + user.path() + "/",
    "cd /tmp && rm -rf ~",
  };
  std::string input;
  for (auto& c : commands) {
    json::value line;
    line["tool"] = "terminal";
    line["args"]["command"] = c;
    input += line.dump() + "\n";
  }
  for (bool yolo : {false, true}) {
    std::vector<std::string> args{"tool", "--stdin"};
    if (yolo)
      args.insert(args.begin(), "--yolo");
    auto r = test::run_mibyan(args, env(input));
    BOOST_CHECK_EQUAL(r.exit_code, 0);
    size_t n = 0;
    size_t pos = 0;
    while (pos < r.out.size()) {
      auto nl = r.out.find('\n', pos);
      if (nl == std::string::npos)
        nl = r.out.size();
      auto parsed = json::parse(r.out.substr(pos, nl - pos));
      pos = nl + 1;
      if (!parsed)
        continue;
      auto& res = *parsed.v;
      BOOST_CHECK_MESSAGE(res.get_string("status") == "blocked"
                            && res.get_bool("hardline", false),
                          "not blocked: " << commands.at(n) << " -> "
                                          << res.dump());
      BOOST_CHECK(contains(res.get_string("error"), "BLOCKED (hardline)"));
      BOOST_CHECK_EQUAL(res.get_int("exit_code", 0), -1);
      ++n;
    }
    BOOST_CHECK_EQUAL(n, commands.size());
    BOOST_REQUIRE(alive("x/canary"));
  }
}

// Issue 31, items 7 and 8, through `mibyan tool --stdin`: the round-three
// hardline forms are refused under --yolo; harmless look-alikes still run
// under --yolo; obfuscated dangerous forms aimed at the canary are refused
// without --yolo (nobody to approve). Before anything is sent to the
// binary, the same library classifies every command in-process and the
// test stops unless the destructive ones are blocked: nothing destructive
// can run even on a build where the gate is broken.
BOOST_AUTO_TEST_CASE(tool_round_three_forms) {
  approvals::policy yolo;
  yolo.paths = approvals::home_paths{user.path(), home.path(), {}};
  yolo.bypass = true;
  approvals::policy manual;
  manual.paths = yolo.paths;
  std::vector<std::string> hard = {
    "rm -rf /usr/..", "rm -rf /et?", "rm -rf /[e]tc", "cd / && rm -rf *",
    "echo b > /proc/sysrq-trigger", "chown -R nobody /", "X=rm; $X -rf /",
    "echo c | tee /proc/./sysrq-trigger", "cd ~ && rm -rf *",
    "printf 'rm -rf /' | bash", "chmod -R 777 /u*",
  };
  for (auto& c : hard)
    BOOST_REQUIRE_MESSAGE(approvals::assess(c, yolo).result
                            == approvals::outcome::hardline,
                          "not sent: the gate does not block " << c);
  std::vector<std::string> lookalikes = {
    "echo rm -rf /usr/..", "ls -d /et?", "ls -d /[e]tc", "cd / && ls -d *",
    "echo b > sysrq-test && cat sysrq-test", "echo /proc/sysrq-trigger",
    "echo chown -R nobody /", "X=echo; $X rm -rf /",
    "printf '%s\\n' 'rm -rf /' | cat",
  };
  for (auto& c : lookalikes)
    BOOST_REQUIRE_MESSAGE(approvals::assess(c, manual).result
                            == approvals::outcome::approved,
                          "look-alike flagged: " << c);
  std::vector<std::string> dangerous = {
    "X=rm; $X -rf ~/x", "$'\\x72\\x6d' -rf ~/x",
    "$(printf '\\162\\155') -rf ~/x", "printf 'rm -rf ~/x' | bash",
    "awk 'BEGIN{system(\"rm -rf ~/x\")}'",
    "tar --remove-files -cf ~/x.tar -C ~ x",
    "python3 - <<EOF\nimport os, shutil\n"
    "shutil.rmtree(os.path.expanduser('~/x'))\nEOF",
  };
  for (auto& c : dangerous)
    BOOST_REQUIRE_MESSAGE(approvals::assess(c, manual).result
                            == approvals::outcome::needs_approval,
                          "not sent: the gate does not flag " << c);
  auto results = [&](const std::vector<std::string>& commands, bool bypass) {
    std::string input;
    for (auto& c : commands) {
      json::value line;
      line["tool"] = "terminal";
      line["args"]["command"] = c;
      input += line.dump() + "\n";
    }
    std::vector<std::string> args{"tool", "--stdin"};
    if (bypass)
      args.insert(args.begin(), "--yolo");
    auto r = test::run_mibyan(args, env(input));
    BOOST_CHECK_EQUAL(r.exit_code, 0);
    std::vector<json::value> out;
    size_t pos = 0;
    while (pos < r.out.size()) {
      auto nl = r.out.find('\n', pos);
      if (nl == std::string::npos)
        nl = r.out.size();
      auto parsed = json::parse(r.out.substr(pos, nl - pos));
      pos = nl + 1;
      if (parsed)
        out.push_back(*parsed.v);
    }
    BOOST_REQUIRE_EQUAL(out.size(), commands.size());
    return out;
  };
  auto got = results(hard, true);
  for (size_t i = 0; i < hard.size(); ++i) {
    BOOST_CHECK_MESSAGE(got[i].get_string("status") == "blocked"
                          && got[i].get_bool("hardline", false),
                        "not blocked under --yolo: " << hard[i] << " -> "
                                                     << got[i].dump());
    BOOST_CHECK_EQUAL(got[i].get_int("exit_code", 0), -1);
  }
  BOOST_REQUIRE(alive("x/canary"));
  got = results(lookalikes, true);
  for (size_t i = 0; i < lookalikes.size(); ++i)
    BOOST_CHECK_MESSAGE(got[i].get_string("status") != "blocked"
                          && got[i].get_int("exit_code", -1) == 0,
                        "look-alike did not run: " << lookalikes[i] << " -> "
                                                   << got[i].dump());
  got = results(dangerous, false);
  for (size_t i = 0; i < dangerous.size(); ++i)
    BOOST_CHECK_MESSAGE(got[i].get_string("status") == "blocked"
                          && contains(got[i].dump(), "no user is present"),
                        "ran without approval: " << dangerous[i] << " -> "
                                                 << got[i].dump());
  BOOST_CHECK(alive("x/canary"));
}

// A deny rule blocks even under --yolo; without it --yolo runs the command.
BOOST_AUTO_TEST_CASE(tool_deny_glob_and_yolo) {
  home.write("config.yaml", "approvals:\n  deny: [\"*/a/canary*\"]\n");
  auto r = test::run_mibyan(
    {"--yolo", "tool", "terminal",
     terminal_args("rm -rf " + user.path() + "/a/canary")},
    env());
  BOOST_CHECK(contains(r.out, "BLOCKED: this command matches the "
                              "user-defined deny rule"));
  BOOST_CHECK(alive("a/canary"));
  // Not yolo: a dangerous command is refused (no user present).
  r = test::run_mibyan(
    {"tool", "terminal", terminal_args("rm -rf " + user.path() + "/b")},
    env());
  BOOST_CHECK(contains(r.out, "no user is present"));
  BOOST_CHECK(contains(r.out, "approvals.single_query_mode"));
  BOOST_CHECK(alive("b/canary"));
  // --yolo lifts the approval (the rule does not match this path).
  r = test::run_mibyan(
    {"--yolo", "tool", "terminal", terminal_args("rm -rf " + user.path()
                                                 + "/b")},
    env());
  BOOST_CHECK(contains(r.out, "\"exit_code\":0"));
  BOOST_CHECK(!alive("b/canary"));
}

// `mibyan run`: the model asks for rm -rf ~/x, gets the denial, the canary
// survives and the turn goes on to its final answer.
BOOST_AUTO_TEST_CASE(run_denies_without_a_user) {
  script(completion("", "terminal", terminal_args("rm -rf ~/x")));
  script(completion("I could not delete it."));
  auto r = test::run_mibyan({"run", "--provider", "custom", "--base-url",
                             server.url("/v1"), "--model", "m",
                             "delete ~/x"},
                            env());
  BOOST_CHECK_EQUAL(r.exit_code, 0);
  BOOST_CHECK_EQUAL(r.out, "I could not delete it.\n");
  BOOST_CHECK(alive("x/canary"));
  auto reqs = requests();
  BOOST_REQUIRE_EQUAL(reqs.size(), 2u);
  auto msgs = reqs[1]["messages"].dump();
  BOOST_CHECK(contains(msgs, "BLOCKED"));
  BOOST_CHECK(contains(msgs, "no user is present"));
  BOOST_CHECK(contains(msgs, "did NOT consent"));
  BOOST_CHECK(contains(msgs, "\\\"status\\\":\\\"blocked\\\""));
}

// execute_code: a sandboxed kernel below $HOME runs (the isolated-backend
// fast path of docs/approvals.md) and its terminal("rm -rf ~") is blocked;
// at $HOME itself, or without the sandbox, and with nobody to approve, the
// script is refused as a whole.
BOOST_AUTO_TEST_CASE(execute_code_guard_and_script_terminal) {
  auto code = std::string{"from mibyan_tools import terminal\n"
                          "r = terminal('rm -rf ~')\n"
                          "print(r.get('status'), r.get('hardline'))\n"
                          "print(r.get('error'))\n"};
  json::value args;
  args["code"] = code;
  user.write("work/.keep", "");
  auto below_home = [&] {
    auto o = env();
    o.cwd = user / "work";
    return o;
  };
  auto r = test::run_mibyan({"tool", "execute_code", args.dump()}, env());
  BOOST_CHECK_MESSAGE(contains(r.out, "\"status\":\"blocked\""), r.out);
  BOOST_CHECK(contains(r.out, "execute_code runs a script"));
  r = test::run_mibyan({"tool", "execute_code", args.dump()}, below_home());
  BOOST_CHECK_MESSAGE(contains(r.out, "blocked True"), r.out);
  BOOST_CHECK(contains(r.out, "BLOCKED (hardline): home directory delete"));
  BOOST_CHECK(alive("x/canary"));
  home.write("config.yaml",
             "code_execution:\n  sandbox: \"off\"\n  prestart_kernels: 0\n");
  r = test::run_mibyan({"tool", "execute_code", args.dump()}, below_home());
  BOOST_CHECK_MESSAGE(contains(r.out, "\"status\":\"blocked\""), r.out);
  BOOST_CHECK(contains(r.out, "execute_code runs a script"));
  BOOST_CHECK(alive("x/canary"));
  home.write("config.yaml",
             "approvals:\n  single_query_mode: approve\n"
             "code_execution:\n  prestart_kernels: 0\n");
  r = test::run_mibyan({"tool", "execute_code", args.dump()}, env());
  BOOST_CHECK_MESSAGE(contains(r.out, "blocked True"), r.out);
  BOOST_CHECK(contains(r.out, "BLOCKED (hardline): home directory delete"));
  BOOST_CHECK(alive("x/canary"));
  // A dangerous (not hardline) script command under the opt-in runs only
  // because the user opted in; a deny rule still stops it.
  home.write("config.yaml",
             "approvals:\n  single_query_mode: approve\n"
             "  deny: [\"*/x*\"]\n"
             "code_execution:\n  prestart_kernels: 0\n");
  json::value args2;
  args2["code"] = "from mibyan_tools import terminal\n"
                  "print(terminal('rm -rf " + user.path() + "/x')['error'])\n";
  r = test::run_mibyan({"tool", "execute_code", args2.dump()}, env());
  BOOST_CHECK_MESSAGE(contains(r.out, "user-defined deny rule"), r.out);
  BOOST_CHECK(alive("x/canary"));
}

// `mibyan chat` on a terminal: once, session, deny and timeout.
BOOST_AUTO_TEST_CASE(chat_prompt_once_session_deny_timeout) {
  home.write("config.yaml", "approvals:\n  timeout: 2\n");
  auto dir = [&](const std::string& d) { return user.path() + "/" + d; };
  // 1: once -> runs.
  script(completion("", "terminal", terminal_args("rm -rf " + dir("a"))));
  script(completion("deleted a"));
  // 2: deny -> canary survives, the model reads the denial.
  script(completion("", "terminal", terminal_args("rm -rf " + dir("b"))));
  script(completion("b stays"));
  // 3: timeout -> canary survives.
  script(completion("", "terminal", terminal_args("rm -rf " + dir("x"))));
  script(completion("x stays"));
  // 4: session -> runs, and the next recursive rm is not asked about.
  script(completion("", "terminal",
                    terminal_args("rm -rf " + dir("x") + "/canary")));
  script(completion("", "terminal", terminal_args("rm -rf " + dir("x"))));
  script(completion("all gone"));
  pty_child chat{agent_args("chat"), pty_env()};
  BOOST_REQUIRE(chat.wait_for("> "));
  chat.send("delete a\n");
  BOOST_REQUIRE(chat.wait_for("[approval needed] recursive rm"));
  BOOST_CHECK(chat.wait_for("[o]nce, [s]ession, [a]lways, [d]eny"));
  BOOST_CHECK(alive("a/canary"));
  chat.send("o\n");
  BOOST_REQUIRE(chat.wait_for("deleted a"));
  BOOST_CHECK(!alive("a/canary"));
  chat.send("delete b\n");
  BOOST_REQUIRE(chat.wait_for("[approval needed]", 2));
  chat.send("d\n");
  BOOST_REQUIRE(chat.wait_for("b stays"));
  BOOST_CHECK(alive("b/canary"));
  chat.send("delete x\n");
  BOOST_REQUIRE(chat.wait_for("[approval needed]", 3));
  BOOST_REQUIRE(chat.wait_for("no answer: denied"));
  BOOST_REQUIRE(chat.wait_for("x stays"));
  BOOST_CHECK(alive("x/canary"));
  chat.send("delete x for good\n");
  BOOST_REQUIRE(chat.wait_for("[approval needed]", 4));
  chat.send("s\n");
  BOOST_REQUIRE(chat.wait_for("all gone"));
  BOOST_CHECK_EQUAL(count_of(chat.seen, "[approval needed]"), 4u);
  BOOST_CHECK(!alive("x"));
  BOOST_CHECK_EQUAL(chat.finish(), 0);
  auto reqs = requests();
  BOOST_REQUIRE_EQUAL(reqs.size(), 9u);
  auto denied = reqs[3]["messages"].dump();
  BOOST_CHECK(contains(denied, "the user denied"));
  BOOST_CHECK(contains(denied, "did NOT consent"));
  auto timed_out = reqs[5]["messages"].dump();
  BOOST_CHECK(contains(timed_out, "Silence is not consent"));
}

// Ctrl-C while the prompt waits: the call is cancelled, the prompt stops
// waiting, nothing runs.
BOOST_AUTO_TEST_CASE(chat_interrupt_during_prompt) {
  script(completion("", "terminal",
                    terminal_args("rm -rf " + user.path() + "/a")));
  script(completion("after the interrupt"));
  pty_child chat{agent_args("chat"), pty_env()};
  BOOST_REQUIRE(chat.wait_for("> "));
  chat.send("delete a\n");
  BOOST_REQUIRE(chat.wait_for("[approval needed]"));
  chat.send("\x03"); // SIGINT through the terminal
  BOOST_REQUIRE(chat.wait_for("-> denied"));
  BOOST_CHECK(chat.wait_for("[interrupted]"));
  BOOST_CHECK(alive("a/canary"));
  BOOST_CHECK_EQUAL(chat.finish(), 0);
  BOOST_CHECK(alive("a/canary"));
}

BOOST_AUTO_TEST_SUITE_END()
