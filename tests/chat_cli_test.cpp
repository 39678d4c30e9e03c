#define BOOST_TEST_MODULE chat_cli
#include "tests/support/paths.hpp"
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <csignal>
#include <fcntl.h>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "base/json.hpp"
#include "tests/support/http_server.hpp"
#include "tests/support/scripted_replies.hpp"
#include "tests/support/cli_child.hpp"
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mibyan;
using namespace std::chrono;

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

using test::completion;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < text.size()) {
    auto nl = text.find('\n', pos);
    if (nl == std::string::npos)
      nl = text.size();
    out.push_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return out;
}

mode_t mode_of(const std::string& path) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0)
    return 0;
  return st.st_mode & 0777;
}

// Session ids announced on stderr ("session: ID").
std::vector<std::string> announced_sessions(const std::string& err) {
  std::vector<std::string> out;
  for (auto& l : lines_of(err))
    if (l.rfind("session: ", 0) == 0)
      out.push_back(l.substr(9));
  return out;
}

struct fixture {
  test::http_server server;
  test::temp_dir home;

  test::process_options env(const std::string& input = {}) {
    auto o = test::cli_options(home.path(), 60);
    o.input = input;
    return o;
  }

  void script(const std::string& body, int status = 200, int delay_ms = 0) {
    json::value s;
    s["path"] = "/v1/chat/completions";
    s["status"] = status;
    s["body"] = body;
    if (delay_ms > 0)
      s["delay_ms"] = delay_ms;
    server.script(s.dump());
  }

  std::vector<std::string> base_args(const std::string& command) {
    return {command, "--provider", "custom", "--base-url", server.url("/v1"),
            "--model", "m"};
  }

  std::vector<json::value> requests() { return test::request_bodies(server); }

  void wait_for_requests(size_t n) {
    for (int i = 0; i < 500 && requests().size() < n; ++i)
      std::this_thread::sleep_for(milliseconds{20});
    BOOST_REQUIRE_GE(requests().size(), n);
  }

  // Starts the CLI with a pipe as stdin (returned in `*in`); output goes
  // to files in home.
  pid_t spawn(const std::vector<std::string>& args, int* in) {
    return test::spawn_cli(args, home.path(), home / "cli.out",
                           home / "cli.err", in);
  }

  void send_line(int fd, const std::string& line) {
    auto data = line + "\n";
    BOOST_REQUIRE_EQUAL(::write(fd, data.data(), data.size()),
                        static_cast<ssize_t>(data.size()));
  }

  // Waits (at most 20 s) until cli.out contains `part`.
  bool wait_for_output(const std::string& part) {
    for (int i = 0; i < 1000; ++i) {
      if (contains(test::slurp(home / "cli.out"), part))
        return true;
      std::this_thread::sleep_for(milliseconds{20});
    }
    return false;
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(chat_cli, fixture)

BOOST_AUTO_TEST_CASE(two_lines_share_one_session) {
  script(completion("Hello, Ada."));
  script(completion("You are Ada."));
  auto r = test::run_mibyan(base_args("chat"),
                            env("hi, I am Ada\nwho am I?\n"));
  BOOST_CHECK_EQUAL(r.exit_code, 0);
  BOOST_CHECK_EQUAL(r.out, "Hello, Ada.\nYou are Ada.\n");
  BOOST_CHECK_EQUAL(announced_sessions(r.err).size(), 1u);
  auto reqs = requests();
  BOOST_REQUIRE_EQUAL(reqs.size(), 2u);
  auto first = reqs[0]["messages"].dump();
  BOOST_CHECK(!contains(first, "Hello, Ada."));
  auto second = reqs[1]["messages"].dump();
  BOOST_CHECK(contains(second, "hi, I am Ada"));
  BOOST_CHECK(contains(second, "Hello, Ada."));
  BOOST_CHECK(contains(second, "who am I?"));
  BOOST_CHECK_EQUAL(reqs[1]["messages"].size(),
                    reqs[0]["messages"].size() + 2);
}

BOOST_AUTO_TEST_CASE(new_starts_another_session_and_exit_leaves) {
  script(completion("first answer"));
  script(completion("second answer"));
  auto r = test::run_mibyan(base_args("chat"),
                            env("remember pineapple\n/new\nwhat fruit?\n"
                                "/exit\nnever sent\n"));
  BOOST_CHECK_EQUAL(r.exit_code, 0);
  BOOST_CHECK_EQUAL(r.out, "first answer\nsecond answer\n");
  auto ids = announced_sessions(r.err);
  BOOST_REQUIRE_EQUAL(ids.size(), 2u);
  BOOST_CHECK_NE(ids[0], ids[1]);
  auto reqs = requests();
  BOOST_REQUIRE_EQUAL(reqs.size(), 2u);
  auto second = reqs[1]["messages"].dump();
  BOOST_CHECK(!contains(second, "pineapple"));
  BOOST_CHECK(contains(second, "what fruit?"));
  BOOST_CHECK(!contains(second, "never sent"));
}

BOOST_AUTO_TEST_CASE(session_option_resumes_across_processes) {
  script(completion("noted"));
  auto a = base_args("chat");
  a.insert(a.end(), {"--session", "chat-s1"});
  auto r1 = test::run_mibyan(a, env("my name is Bo\n"));
  BOOST_CHECK_EQUAL(r1.exit_code, 0);
  auto ids = announced_sessions(r1.err);
  BOOST_REQUIRE_EQUAL(ids.size(), 1u);
  BOOST_CHECK_EQUAL(ids[0], "chat-s1");
  script(completion("Bo"));
  auto r2 = test::run_mibyan(a, env("name?\n"));
  BOOST_CHECK_EQUAL(r2.exit_code, 0);
  BOOST_CHECK_EQUAL(r2.out, "Bo\n");
  auto reqs = requests();
  BOOST_REQUIRE_EQUAL(reqs.size(), 2u);
  BOOST_CHECK(contains(reqs[1]["messages"].dump(), "my name is Bo"));
}

BOOST_AUTO_TEST_CASE(eof_and_blank_lines_leave_0) {
  auto r = test::run_mibyan(base_args("chat"), env(""));
  BOOST_CHECK_EQUAL(r.exit_code, 0);
  BOOST_CHECK(r.out.empty());
  r = test::run_mibyan(base_args("chat"), env("\n   \n\t\n"));
  BOOST_CHECK_EQUAL(r.exit_code, 0);
  // A last line without a newline still runs.
  script(completion("ok"));
  r = test::run_mibyan(base_args("chat"), env("no newline"));
  BOOST_CHECK_EQUAL(r.exit_code, 0);
  BOOST_CHECK_EQUAL(r.out, "ok\n");
  BOOST_CHECK_EQUAL(requests().size(), 1u);
}

BOOST_AUTO_TEST_CASE(help_and_unknown_commands) {
  auto r = test::run_mibyan(base_args("chat"), env("/help\n/bogus\n"));
  BOOST_CHECK_EQUAL(r.exit_code, 0);
  BOOST_CHECK(contains(r.out, "/new"));
  BOOST_CHECK(contains(r.out, "/exit"));
  BOOST_CHECK(contains(r.out, "/help"));
  BOOST_CHECK_MESSAGE(contains(r.err, "unknown command /bogus"), r.err);
  BOOST_CHECK(requests().empty());
}

BOOST_AUTO_TEST_CASE(no_provider_configured) {
  auto r = test::run_mibyan({"chat"}, env("hello\n"));
  BOOST_CHECK_EQUAL(r.exit_code, 2);
  BOOST_CHECK_MESSAGE(contains(r.err, "No model provider is configured"),
                      r.err);
  BOOST_CHECK(r.out.empty());
  // Same message as `mibyan run`.
  auto run = test::run_mibyan({"run", "hello"}, env());
  BOOST_CHECK_EQUAL(run.exit_code, 2);
  auto strip = [](std::string s, const std::string& prefix) {
    return s.rfind(prefix, 0) == 0 ? s.substr(prefix.size()) : s;
  };
  BOOST_CHECK_EQUAL(strip(r.err, "mibyan chat: "),
                    strip(run.err, "mibyan run: "));
}

BOOST_AUTO_TEST_CASE(usage_errors) {
  auto o = env("hi\n");
  BOOST_CHECK_EQUAL(test::run_mibyan({"chat", "--bogus"}, o).exit_code, 2);
  BOOST_CHECK_EQUAL(test::run_mibyan({"chat", "prompt"}, o).exit_code, 2);
  BOOST_CHECK_EQUAL(test::run_mibyan({"chat", "--model"}, o).exit_code, 2);
  auto r = test::run_mibyan({"chat", "--max-iterations", "0"}, o);
  BOOST_CHECK_EQUAL(r.exit_code, 2);
  BOOST_CHECK(contains(r.err, "--max-iterations"));
  auto a = base_args("chat");
  a.insert(a.end(), {"--toolsets", "nope"});
  r = test::run_mibyan(a, o);
  BOOST_CHECK_EQUAL(r.exit_code, 2);
  BOOST_CHECK(contains(r.err, "nope"));
  r = test::run_mibyan({"chat", "--help"}, o);
  BOOST_CHECK_EQUAL(r.exit_code, 0);
  BOOST_CHECK(contains(r.err, "usage: mibyan chat"));
  BOOST_CHECK(requests().empty());
}

BOOST_AUTO_TEST_CASE(failed_turn_does_not_end_the_chat) {
  script(R"({"error":{"message":"model m is not served here"}})", 400);
  script(completion("recovered"));
  auto r = test::run_mibyan(base_args("chat"), env("one\ntwo\n"));
  BOOST_CHECK_EQUAL(r.exit_code, 0);
  BOOST_CHECK_MESSAGE(contains(r.err, "model m is not served here"), r.err);
  BOOST_CHECK_EQUAL(r.out, "recovered\n");
}

BOOST_AUTO_TEST_CASE(streams_tokens_once) {
  server.script(
    test::streamed_completion_script({"Stream", "ed ans", "wer."}, 20));
  auto r = test::run_mibyan(base_args("chat"), env("stream please\n"));
  BOOST_CHECK_EQUAL(r.exit_code, 0);
  BOOST_CHECK_EQUAL(r.out, "Streamed answer.\n");
  auto reqs = requests();
  BOOST_REQUIRE_EQUAL(reqs.size(), 1u);
  BOOST_CHECK(reqs[0]["stream"].as_bool());
}

BOOST_AUTO_TEST_CASE(sigint_interrupts_the_turn_and_chat_goes_on) {
  script(completion("too late"), 200, 30000);
  int in = -1;
  auto t0 = steady_clock::now();
  pid_t pid = spawn(base_args("chat"), &in);
  send_line(in, "take your time");
  wait_for_requests(1);
  std::this_thread::sleep_for(milliseconds{500});
  ::kill(pid, SIGINT);
  BOOST_CHECK_MESSAGE(wait_for_output("[interrupted]"),
                      test::slurp(home / "cli.out"));
  BOOST_CHECK_LT(duration<double>(steady_clock::now() - t0).count(), 15.0);
  // SIGINT while idle does not end the program either.
  ::kill(pid, SIGINT);
  std::this_thread::sleep_for(milliseconds{300});
  BOOST_CHECK_EQUAL(::waitpid(pid, nullptr, WNOHANG), 0);
  script(completion("still here"));
  send_line(in, "are you there?");
  BOOST_CHECK(wait_for_output("still here"));
  ::close(in);
  int status = 0;
  ::waitpid(pid, &status, 0);
  BOOST_REQUIRE(WIFEXITED(status));
  BOOST_CHECK_EQUAL(WEXITSTATUS(status), 0);
  auto out = test::slurp(home / "cli.out");
  BOOST_CHECK_EQUAL(out, "[interrupted]\nstill here\n");
  BOOST_CHECK(!contains(out, "too late"));
  auto reqs = requests();
  BOOST_REQUIRE_EQUAL(reqs.size(), 2u);
  auto second = reqs[1]["messages"].dump();
  BOOST_CHECK(contains(second, "take your time"));
  BOOST_CHECK(contains(second, "are you there?"));
  BOOST_CHECK_EQUAL(announced_sessions(test::slurp(home / "cli.err")).size(),
                    1u);
}

// -- trajectories ------------------------------------------------------------

BOOST_AUTO_TEST_CASE(run_save_trajectory_writes_one_line_per_turn) {
  auto work = home / "work";
  BOOST_REQUIRE_EQUAL(::mkdir(work.c_str(), 0700), 0);
  auto o = env();
  o.cwd = work;
  auto a = base_args("run");
  a.insert(a.end(), {"--save-trajectory", "--session", "traj-1"});
  script(completion("Reading.", "read_file", R"({"path":"/nonexistent/x"})"));
  script(completion("There is no such file."));
  auto args1 = a;
  args1.push_back("read /nonexistent/x");
  auto r = test::run_mibyan(args1, o);
  BOOST_CHECK_EQUAL(r.exit_code, 0);
  BOOST_CHECK_EQUAL(r.out, "There is no such file.\n");
  auto path = work + "/trajectory_samples.jsonl";
  BOOST_CHECK_EQUAL(mode_of(path), 0600u);
  auto lines = lines_of(test::slurp(path));
  BOOST_REQUIRE_EQUAL(lines.size(), 1u);
  auto t = json::parse(lines[0]);
  BOOST_REQUIRE_MESSAGE(t, lines[0]);
  BOOST_CHECK(t.v->find("completed")->as_bool());
  BOOST_CHECK_EQUAL(t.v->find("model")->as_string(), "m");
  BOOST_CHECK_EQUAL(t.v->find("timestamp")->as_string().size(), 19u);
  auto& conv = *t.v->find("conversations");
  BOOST_REQUIRE_EQUAL(conv.size(), 5u);
  std::vector<std::string> froms;
  for (auto& e : conv.as_array())
    froms.push_back(e.find("from")->as_string());
  BOOST_CHECK((froms == std::vector<std::string>{"system", "human", "gpt",
                                                 "tool", "gpt"}));
  auto& arr = conv.as_array();
  BOOST_CHECK(contains(arr[0].find("value")->as_string(), "\"read_file\""));
  BOOST_CHECK_EQUAL(arr[1].find("value")->as_string(), "read /nonexistent/x");
  BOOST_CHECK(contains(arr[2].find("value")->as_string(),
                       "<tool_call>\n{\"name\":\"read_file\",\"arguments\":"
                       "{\"path\":\"/nonexistent/x\"}}\n</tool_call>"));
  BOOST_CHECK(contains(arr[3].find("value")->as_string(),
                       "<tool_response>\n{\"tool_call_id\":\"call_1\","
                       "\"name\":\"read_file\",\"content\":{"));
  BOOST_CHECK_EQUAL(arr[4].find("value")->as_string(),
                    "<think>\n</think>\nThere is no such file.");
  // A second turn of the session appends exactly one more line.
  script(completion("Bye."));
  auto args2 = a;
  args2.push_back("bye");
  r = test::run_mibyan(args2, o);
  BOOST_CHECK_EQUAL(r.exit_code, 0);
  lines = lines_of(test::slurp(path));
  BOOST_REQUIRE_EQUAL(lines.size(), 2u);
  auto t2 = json::parse(lines[1]);
  BOOST_REQUIRE(t2);
  BOOST_CHECK_EQUAL(t2.v->find("conversations")->size(), 7u);
  // Without the flag nothing is written.
  script(completion("quiet"));
  auto args3 = base_args("run");
  args3.push_back("quiet");
  r = test::run_mibyan(args3, o);
  BOOST_CHECK_EQUAL(r.exit_code, 0);
  BOOST_CHECK_EQUAL(lines_of(test::slurp(path)).size(), 2u);
  BOOST_CHECK_EQUAL(mode_of(work + "/failed_trajectories.jsonl"), 0u);
}

BOOST_AUTO_TEST_CASE(config_enables_trajectories_and_failures) {
  home.write("config.yaml", "agent:\n  save_trajectories: true\n"
                            "  trajectory_dir: " + home / "traj" + "\n");
  script(completion("fine"));
  script(R"({"error":{"message":"model m is not served here"}})", 400);
  auto r = test::run_mibyan(base_args("chat"), env("one\ntwo\n"));
  BOOST_CHECK_EQUAL(r.exit_code, 0);
  BOOST_CHECK_EQUAL(mode_of(home / "traj"), 0700u);
  auto ok = lines_of(home.read("traj/trajectory_samples.jsonl"));
  BOOST_REQUIRE_EQUAL(ok.size(), 1u);
  BOOST_CHECK(json::parse(ok[0]));
  auto failed = lines_of(home.read("traj/failed_trajectories.jsonl"));
  BOOST_REQUIRE_EQUAL(failed.size(), 1u);
  auto f = json::parse(failed[0]);
  BOOST_REQUIRE(f);
  BOOST_CHECK(!f.v->find("completed")->as_bool());
  BOOST_CHECK_EQUAL(mode_of(home / "traj/failed_trajectories.jsonl"), 0600u);
  // An unusable directory is reported but the turn still answers.
  home.write("blocker", "x");
  home.write("config.yaml", "agent:\n  save_trajectories: true\n"
                            "  trajectory_dir: " + home / "blocker" + "\n");
  script(completion("answered anyway"));
  auto a = base_args("run");
  a.push_back("hi");
  r = test::run_mibyan(a, env());
  BOOST_CHECK_EQUAL(r.exit_code, 0);
  BOOST_CHECK_EQUAL(r.out, "answered anyway\n");
  BOOST_CHECK_MESSAGE(contains(r.err, "trajectory not saved"), r.err);
  BOOST_CHECK(contains(r.err, "blocker"));
}

BOOST_AUTO_TEST_SUITE_END()
