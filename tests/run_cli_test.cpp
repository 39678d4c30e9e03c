#define BOOST_TEST_MODULE run_cli
#include "tests/support/paths.hpp"
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <csignal>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "base/json.hpp"
#include "storage/session_store.hpp"
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

struct fixture {
  test::http_server server;
  test::temp_dir home;

  test::process_options env() {
    auto o = test::cli_options(home.path(), 60);
    return o;
  }

  void script(const std::string& body, int status = 200) {
    json::value s;
    s["path"] = "/v1/chat/completions";
    s["status"] = status;
    s["body"] = body;
    server.script(s.dump());
  }

  std::vector<std::string> run_args(const std::string& prompt,
                                    const std::string& session = {}) {
    std::vector<std::string> a{"run", "--provider", "custom", "--base-url",
                               server.url("/v1"), "--model", "m"};
    if (!session.empty()) {
      a.push_back("--session");
      a.push_back(session);
    }
    a.push_back(prompt);
    return a;
  }

  std::vector<json::value> requests() { return test::request_bodies(server); }

  // Starts the CLI without waiting for it; output goes to files in home.
  pid_t spawn(const std::vector<std::string>& args) {
    auto out_path = home / "cli.out";
    auto err_path = home / "cli.err";
    pid_t pid = ::fork();
    if (pid == 0) {
      int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      ::dup2(out, 1);
      ::dup2(err, 2);
      test::exec_cli(home.path(), args);
    }
    return pid;
  }

  void wait_for_requests(size_t n) {
    for (int i = 0; i < 500 && requests().size() < n; ++i)
      std::this_thread::sleep_for(milliseconds{20});
    BOOST_REQUIRE_GE(requests().size(), n);
  }
};

// Returns the child processes of `pid` (from /proc).
std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> out;
  auto task_dir = "/proc/" + std::to_string(pid) + "/task";
  std::error_code ec;
  for (auto& t : std::filesystem::directory_iterator{task_dir, ec}) {
    std::ifstream in{t.path() / "children"};
    pid_t child = 0;
    while (in >> child)
      out.push_back(child);
  }
  return out;
}

// Waits (up to 20 s) until `pid` has a child process: the tool is running.
void wait_for_children(pid_t pid) {
  for (int i = 0; i < 400 && children_of(pid).empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds{50});
  // Let the tool settle into its wait.
  std::this_thread::sleep_for(std::chrono::milliseconds{200});
}

std::vector<stored_message> load(const std::string& home,
                                 const std::string& sid) {
  session_store_options so;
  so.dir = session_store::default_dir(home);
  so.read_only = true;
  auto st = session_store::open(so);
  BOOST_REQUIRE_MESSAGE(st, st.error);
  auto msgs = (*st)->load_messages(sid);
  BOOST_REQUIRE_MESSAGE(msgs, msgs.error);
  return *msgs;
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(run_cli, fixture)

BOOST_AUTO_TEST_CASE(answer_and_resume_across_processes) {
  script(completion("Hello, Ada."));
  auto r1 = test::run_mibyan(run_args("hi, I am Ada", "cli-s1"), env());
  BOOST_CHECK_EQUAL(r1.exit_code, 0);
  BOOST_CHECK_EQUAL(r1.out, "Hello, Ada.\n");
  BOOST_CHECK(contains(r1.err, "cli-s1"));
  script(completion("You are Ada."));
  auto r2 = test::run_mibyan(run_args("who am I?", "cli-s1"), env());
  BOOST_CHECK_EQUAL(r2.exit_code, 0);
  BOOST_CHECK_EQUAL(r2.out, "You are Ada.\n");
  auto reqs = requests();
  BOOST_REQUIRE_EQUAL(reqs.size(), 2u);
  auto msgs = reqs[1]["messages"].dump();
  BOOST_CHECK(contains(msgs, "hi, I am Ada"));
  BOOST_CHECK(contains(msgs, "Hello, Ada."));
  BOOST_CHECK(contains(msgs, "who am I?"));
  BOOST_CHECK_EQUAL(reqs[1]["messages"].size(), 4u);
}

BOOST_AUTO_TEST_CASE(json_output) {
  script(completion("forty-two"));
  auto a = run_args("answer?");
  a.insert(a.begin() + 1, "--json");
  auto r = test::run_mibyan(a, env());
  BOOST_CHECK_EQUAL(r.exit_code, 0);
  auto parsed = json::parse(r.out);
  BOOST_REQUIRE_MESSAGE(parsed, r.out);
  auto& res = *parsed.v;
  BOOST_CHECK_EQUAL(res["final_response"].as_string(), "forty-two");
  BOOST_CHECK(res["completed"].as_bool());
  BOOST_CHECK(!res["session_id"].as_string().empty());
  BOOST_CHECK_EQUAL(res["provider"].as_string(), "custom");
}

BOOST_AUTO_TEST_CASE(defaults_from_config) {
  home.write("config.yaml", "model:\n  provider: custom\n  default: cfg-model"
                            "\n  base_url: " + server.url("/v1") + "\n");
  script(completion("configured"));
  auto r = test::run_mibyan({"run", "hello"}, env());
  BOOST_CHECK_EQUAL(r.exit_code, 0);
  BOOST_CHECK_EQUAL(r.out, "configured\n");
  auto reqs = requests();
  BOOST_REQUIRE_EQUAL(reqs.size(), 1u);
  BOOST_CHECK_EQUAL(reqs[0]["model"].as_string(), "cfg-model");
}

BOOST_AUTO_TEST_CASE(no_provider_configured) {
  auto r = test::run_mibyan({"run", "hello"}, env());
  BOOST_CHECK_EQUAL(r.exit_code, 2);
  BOOST_CHECK(contains(r.err, "No model provider is configured"));
  BOOST_CHECK(r.out.empty());
}

BOOST_AUTO_TEST_CASE(failed_turn_exits_1) {
  script(R"({"error":{"message":"model m is not served here"}})", 400);
  auto r = test::run_mibyan(run_args("hi"), env());
  BOOST_CHECK_EQUAL(r.exit_code, 1);
  BOOST_CHECK_MESSAGE(contains(r.err, "model m is not served here"), r.err);
  BOOST_CHECK(r.out.empty());
}

BOOST_AUTO_TEST_CASE(usage_errors) {
  auto o = env();
  BOOST_CHECK_EQUAL(test::run_mibyan({"run"}, o).exit_code, 2);
  BOOST_CHECK_EQUAL(test::run_mibyan({"run", "a", "b"}, o).exit_code, 2);
  BOOST_CHECK_EQUAL(test::run_mibyan({"run", "  "}, o).exit_code, 2);
  BOOST_CHECK_EQUAL(test::run_mibyan({"run", "--bogus", "x"}, o).exit_code,
                    2);
  auto r = test::run_mibyan({"run", "--max-iterations", "zero", "x"}, o);
  BOOST_CHECK_EQUAL(r.exit_code, 2);
  BOOST_CHECK(contains(r.err, "--max-iterations"));
  BOOST_CHECK_EQUAL(test::run_mibyan({"run", "--model"}, o).exit_code, 2);
  auto a = run_args("x");
  a.insert(a.begin() + 1, {"--toolsets", "nope"});
  r = test::run_mibyan(a, o);
  BOOST_CHECK_EQUAL(r.exit_code, 2);
  BOOST_CHECK(contains(r.err, "nope"));
  BOOST_CHECK(requests().empty());
}

BOOST_AUTO_TEST_CASE(streams_to_a_terminal) {
  server.script(
    test::streamed_completion_script({"Stream", "ed ans", "wer."}, 30));
  // `script` gives the CLI a pseudo-terminal as stdout.
  std::string cmd = test::mibyan_binary();
  for (auto& a : run_args("stream please"))
    cmd += " '" + a + "'";
  auto r = test::run_process({"script", "-qec", cmd, "/dev/null"}, env());
  BOOST_CHECK_EQUAL(r.exit_code, 0);
  BOOST_CHECK_MESSAGE(contains(r.out, "Streamed answer."), r.out);
  // Printed once: the streamed text is not repeated at the end.
  BOOST_CHECK_EQUAL(r.out.find("Streamed answer."),
                    r.out.rfind("Streamed answer."));
  auto reqs = requests();
  BOOST_REQUIRE_EQUAL(reqs.size(), 1u);
  BOOST_CHECK(reqs[0]["stream"].as_bool());
}

// A tool call whose arguments do not parse, under finish_reason
// "tool_calls", is the model's mistake and not a truncation: the call gets
// an error result with the parser's message and the turn goes on
// (docs/agent_loop.md, "Tool-call arguments"). Non-streamed and streamed.
BOOST_AUTO_TEST_CASE(bad_tool_arguments_get_an_error_result_not_truncation) {
  const std::string bad_args = R"({"path": "README.md")";
  // Non-streamed JSON reply.
  script(completion("", "read_file", bad_args));
  script(completion("Recovered."));
  auto r = test::run_mibyan(run_args("read it", "bad-json-1"), env());
  BOOST_CHECK_EQUAL(r.exit_code, 0);
  BOOST_CHECK_EQUAL(r.out, "Recovered.\n");
  BOOST_CHECK_MESSAGE(!contains(r.out + r.err, "truncated"), r.err);
  // Streamed reply with the same bad arguments.
  json::value s;
  s["path"] = "/v1/chat/completions";
  s["status"] = 200;
  s["headers"]["Content-Type"] = "text/event-stream";
  s["chunks"] = json::value::make_array();
  json::value d;
  d["choices"] = json::value::make_array();
  json::value ch;
  ch["index"] = 0;
  json::value tc;
  tc["index"] = 0;
  tc["id"] = "call_s";
  tc["type"] = "function";
  tc["function"]["name"] = "read_file";
  tc["function"]["arguments"] = bad_args;
  ch["delta"]["tool_calls"] = json::value::make_array();
  ch["delta"]["tool_calls"].push_back(std::move(tc));
  d["choices"].push_back(std::move(ch));
  s["chunks"].push_back("data: " + d.dump() + "\n\n");
  s["chunks"].push_back(R"(data: {"choices":[{"index":0,"delta":{},)"
                        R"("finish_reason":"tool_calls"}]})"
                        "\n\ndata: [DONE]\n\n");
  server.script(s.dump());
  script(completion("Recovered again."));
  auto r2 = test::run_mibyan(run_args("read it", "bad-json-2"), env());
  BOOST_CHECK_EQUAL(r2.exit_code, 0);
  BOOST_CHECK_EQUAL(r2.out, "Recovered again.\n");
  // Each follow-up request carries the error result for the bad call.
  auto reqs = requests();
  BOOST_REQUIRE_EQUAL(reqs.size(), 4u);
  for (size_t i : {size_t{1}, size_t{3}}) {
    auto& msgs = reqs[i]["messages"];
    const json::value* tool_msg = nullptr;
    for (auto& m : msgs.as_array())
      if (m.get_string("role") == "tool")
        tool_msg = &m;
    BOOST_REQUIRE(tool_msg != nullptr);
    auto content = tool_msg->get_string("content");
    BOOST_CHECK_MESSAGE(contains(content, "JSON"), content);
  }
}

BOOST_AUTO_TEST_CASE(sigint_interrupts_the_turn) {
  script(completion("", "terminal", R"({"command":"sleep 30"})"));
  auto t0 = steady_clock::now();
  pid_t pid = spawn(run_args("sleep please", "cli-int"));
  wait_for_requests(1);
  wait_for_children(pid);
  ::kill(pid, SIGINT);
  int status = 0;
  ::waitpid(pid, &status, 0);
  BOOST_CHECK_LT(duration<double>(steady_clock::now() - t0).count(), 10.0);
  BOOST_REQUIRE(WIFEXITED(status));
  BOOST_CHECK_EQUAL(WEXITSTATUS(status), 1);
  auto err = test::slurp(home / "cli.err");
  BOOST_CHECK_MESSAGE(contains(err, "Interrupted"), err);
  auto msgs = load(home.path(), "cli-int");
  BOOST_REQUIRE_GE(msgs.size(), 3u);
  BOOST_CHECK_EQUAL(msgs[2].message.role, "tool");
  BOOST_CHECK(contains(msgs[2].message.content, "cancelled"));
}

BOOST_AUTO_TEST_CASE(kill_9_mid_turn_then_resume) {
  script(completion("", "terminal", R"({"command":"sleep 30"})"));
  pid_t pid = spawn(run_args("run the long job", "cli-k9"));
  wait_for_requests(1);
  wait_for_children(pid);
  // The tool's process group outlives the killed CLI; remember it so the
  // test can end it afterwards.
  auto orphans = children_of(pid);
  BOOST_CHECK(!orphans.empty());
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  for (auto child : orphans)
    ::kill(-child, SIGKILL);
  BOOST_CHECK(WIFSIGNALED(status));
  // Nothing persisted before the kill is lost.
  auto msgs = load(home.path(), "cli-k9");
  BOOST_REQUIRE_EQUAL(msgs.size(), 2u);
  BOOST_CHECK_EQUAL(msgs[0].message.role, "user");
  BOOST_CHECK_EQUAL(msgs[0].message.content, "run the long job");
  BOOST_CHECK_EQUAL(msgs[1].message.role, "assistant");
  BOOST_REQUIRE_EQUAL(msgs[1].message.tool_calls.size(), 1u);
  BOOST_CHECK_EQUAL(msgs[1].message.tool_calls[0].id, "call_1");
  // The next turn works; the unanswered call gets a stub result.
  script(completion("The job was cut short."));
  auto r = test::run_mibyan(run_args("what happened?", "cli-k9"), env());
  BOOST_CHECK_EQUAL(r.exit_code, 0);
  BOOST_CHECK_EQUAL(r.out, "The job was cut short.\n");
  auto reqs = requests();
  BOOST_REQUIRE_EQUAL(reqs.size(), 2u);
  auto sent = reqs[1]["messages"].dump();
  BOOST_CHECK(contains(sent, "run the long job"));
  BOOST_CHECK(contains(sent, "call_1"));
  BOOST_CHECK(contains(sent, "what happened?"));
}

BOOST_AUTO_TEST_SUITE_END()
