// MCP tools through the agent: a scripted model turn calls an MCP tool of
// the real server-everything (stdio) and gets its result; with
// code_execution.mcp_in_scripts an execute_code script calls one through
// mibyan_tools.mcp.<server>.<tool>; without it the namespace is absent;
// a server's sampling/createMessage goes to the configured model; its
// elicitation goes to the session's clarify channel (a callback, the pending
// questions) or is declined; roots are the runtime's cwd; a later
// tools/list_changed reaches the next turn, not the running one.
#define BOOST_TEST_MODULE mcp_agent
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "agent/turn_result.hpp"
#include "base/json.hpp"
#include "config/options.hpp"
#include "runtime/runtime.hpp"
#include "tools/registry.hpp"
#include "tests/support/agent_fixture.hpp"
#include "tests/support/http_server.hpp"
#include "tests/support/mcp_servers.hpp"
#include "tests/support/scripted_replies.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wait_until.hpp"

using namespace mibyan;
using mibyan::test::wait_until;
using mibyan::test::mcp_npm_presence;
BOOST_TEST_GLOBAL_FIXTURE(mcp_npm_presence);

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

struct fixture : test::agent_fixture {
  void start(bool in_scripts, bool sampling = false,
             int64_t idle_timeout = 0, std::string mark = {},
             std::vector<mcp_server_options> extra = {},
             int64_t sampling_rpm = 10) {
    options opts;
    opts.home = home.path();
    opts.agent.api_max_retries = 1;
    opts.approvals.unattended_mode = "approve";
    opts.code_execution.sandbox = "off";
    opts.code_execution.prestart_kernels = 0;
    opts.code_execution.mcp_in_scripts = in_scripts;
    opts.model.provider = "custom";
    opts.model.base_url = server.url("/v1");
    opts.model.default_model = "m";
    opts.env_file["CUSTOM_API_KEY"] = "sk-test-0123456789";
    auto sc = test::everything_stdio();
    sc.sampling.enabled = sampling;
    sc.sampling.max_rpm = sampling_rpm;
    sc.idle_timeout_seconds = idle_timeout;
    if (!mark.empty())
      sc.env = {{"MIBYAN_MCP_MARK", mark}};
    opts.mcp_servers = {sc};
    for (auto& e : extra)
      opts.mcp_servers.push_back(e);
    agent_fixture::start(std::move(opts));
  }

  json::value run(const std::string& prompt) {
    return agent_fixture::run(call(prompt));
  }

  // The content of the tool message in the last request to the model.
  std::string last_tool_result() {
    auto bodies = test::request_bodies(server);
    BOOST_REQUIRE(!bodies.empty());
    auto& msgs = *bodies.back().find("messages");
    for (auto i = msgs.as_array().rbegin(); i != msgs.as_array().rend(); ++i)
      if (i->get_string("role", "") == "tool")
        return i->get_string("content", "");
    return {};
  }
};

// Live processes whose environment holds MIBYAN_MCP_MARK=<mark>.
int marked_processes(const std::string& mark) {
  int n = 0;
  std::error_code ec;
  for (auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    std::ifstream in(e.path() / "environ", std::ios::binary);
    if (!in)
      continue;
    std::stringstream ss;
    ss << in.rdbuf();
    auto text = ss.str();
    if (text.find("MIBYAN_MCP_MARK=" + mark + '\0') != std::string::npos)
      ++n;
  }
  return n;
}

json::value code_args(const std::string& code) {
  json::value a;
  a["code"] = code;
  return a;
}

} // namespace

BOOST_FIXTURE_TEST_CASE(model_calls_an_mcp_tool, fixture) {
  start(false);
  script(test::completion("", "mcp__everything__echo",
                          R"({"message":"from the model"})"));
  script(test::completion("done"));
  run("echo something");
  auto bodies = test::request_bodies(server);
  BOOST_REQUIRE(bodies.size() == 2u);
  BOOST_TEST(contains(bodies.front().find("tools")->dump(),
                      "\"mcp__everything__echo\""));
  BOOST_TEST(contains(last_tool_result(), "Echo: from the model"),
             last_tool_result());
}

BOOST_FIXTURE_TEST_CASE(script_calls_an_mcp_tool_when_allowed, fixture) {
  start(true);
  script(test::completion(
    "", "execute_code",
    code_args("from mibyan_tools import mcp\n"
              "r = mcp.everything.echo(message='from the script')\n"
              "print(r)\n")
      .dump()));
  script(test::completion("done"));
  run("use a script");
  BOOST_TEST(contains(last_tool_result(), "Echo: from the script"),
             last_tool_result());
}

// With mcp_in_scripts, a server's tool list change reaches the scripts
// without a restart: the next cell of a running kernel (its state kept)
// and every new kernel see the new stubs, and the kernel's allow-list
// takes new tools and refuses removed ones.
BOOST_FIXTURE_TEST_CASE(script_stubs_follow_tool_list_changes, fixture) {
  start(true, false, 0, "", {test::misbehaving_stdio("grow", "bad")});
  int n = 0;
  auto call = [&](const std::string& session, const std::string& tool,
                  const std::string& args) {
    tool_call_request req;
    req.session_id = session;
    req.call_id = "c" + std::to_string(++n);
    req.tool = tool;
    req.args_json = args;
    return rt->call_tool(req).result_json;
  };
  auto cell = [&](const std::string& session, const std::string& code) {
    return call(session, "execute_code", code_args(code).dump());
  };
  auto stubs_list = [&](const std::string& name) {
    return contains(tools_of(*rt).find("execute_code")->description(), name);
  };
  auto out = cell("s1", "import mibyan_tools\n"
                        "from mibyan_tools import mcp\n"
                        "kept = 41\n"
                        "print(hasattr(mcp.bad, 'fresh'), "
                        "hasattr(mcp.bad, 'echo'))\n");
  BOOST_TEST(contains(out, "False True"), out);
  BOOST_TEST(!stubs_list("mcp.bad.fresh"));

  call("s1", "mcp__bad__grow", "{}");
  BOOST_REQUIRE(wait_until([&] { return stubs_list("mcp.bad.fresh"); }));
  // The running kernel's next cell: the new tool, the state kept, and the
  // module bound in an earlier cell sees it too.
  out = cell("s1", "from mibyan_tools import mcp\n"
                   "print(mcp.bad.fresh(text='new'))\n"
                   "print(hasattr(mibyan_tools.mcp.bad, 'fresh'), kept + 1)\n");
  BOOST_TEST(contains(out, "echo: new"), out);
  BOOST_TEST(contains(out, "True 42"), out);
  // A new kernel (another session) starts with it.
  out = cell("s2", "from mibyan_tools import mcp\n"
                   "print(mcp.bad.fresh(text='two'))\n");
  BOOST_TEST(contains(out, "echo: two"), out);

  // A removed tool leaves the stubs, and the allow-list refuses it.
  call("s1", "mcp__bad__shrink", "{}");
  BOOST_REQUIRE(wait_until([&] { return !stubs_list("mcp.bad.echo"); }));
  out = cell("s1", "print(hasattr(mibyan_tools.mcp.bad, 'echo'))\n"
                   "try:\n"
                   "    print(mibyan_tools._call('mcp__bad__echo', "
                   "{'text': 'old'}))\n"
                   "except Exception as e:\n"
                   "    print('refused:', e)\n");
  BOOST_TEST(contains(out, "False"), out);
  BOOST_TEST(contains(out, "not available in execute_code"), out);
  BOOST_TEST(!contains(out, "echo: old"), out);
}

BOOST_FIXTURE_TEST_CASE(scripts_get_no_mcp_by_default, fixture) {
  start(false);
  script(test::completion(
    "", "execute_code",
    code_args("import mibyan_tools\n"
              "print(hasattr(mibyan_tools, 'mcp'))\n"
              "print(mibyan_tools._call('mcp__everything__echo', "
              "{'message': 'sneaky'}))\n")
      .dump()));
  script(test::completion("done"));
  run("try a script");
  auto out = last_tool_result();
  BOOST_TEST(contains(out, "False"), out);
  BOOST_TEST(!contains(out, "Echo: sneaky"), out);
}

BOOST_FIXTURE_TEST_CASE(sampling_goes_to_the_configured_model, fixture) {
  start(false, true);
  script(test::completion("", "mcp__everything__trigger_sampling_request",
                          R"({"prompt":"say hi","maxTokens":50})"));
  script(test::completion("sampled answer 42")); // the sampling request
  script(test::completion("done"));
  run("sample");
  BOOST_TEST(contains(last_tool_result(), "sampled answer 42"),
             last_tool_result());
  auto bodies = test::request_bodies(server);
  BOOST_REQUIRE(bodies.size() == 3u);
  // The sampling request carried the server's system prompt and a capped
  // token limit.
  auto sampling = bodies[1].dump();
  BOOST_TEST(contains(sampling, "You are a helpful test server."), sampling);
  BOOST_TEST(contains(sampling, "say hi"), sampling);
}

BOOST_FIXTURE_TEST_CASE(idle_stdio_server_is_recycled_and_restarted, fixture) {
  auto mark = "idle-" + std::to_string(::getpid());
  start(false, false, 1, mark);
  BOOST_TEST(marked_processes(mark) == 1);
  // Idle for a second: the upkeep actor stops it.
  BOOST_TEST(wait_until([&] { return marked_processes(mark) == 0; }));
  // The next call starts it again.
  tool_call_request call;
  call.tool = "mcp__everything__echo";
  call.args_json = R"({"message":"again"})";
  auto out = rt->call_tool(call);
  BOOST_TEST(contains(out.result_json, "Echo: again"), out.result_json);
  BOOST_TEST(marked_processes(mark) == 1);
  // Shutdown kills it.
  rt.reset();
  BOOST_TEST(wait_until([&] { return marked_processes(mark) == 0; }));
}

BOOST_FIXTURE_TEST_CASE(unanswered_keepalive_ping_drops_the_server, fixture) {
  auto mark = "deaf-" + std::to_string(::getpid());
  auto deaf = test::misbehaving_stdio("deaf_ping", "deaf");
  deaf.keepalive_interval = 5; // the floor
  deaf.connect_timeout = 2;    // also bounds the ping
  deaf.env = {{"MIBYAN_MCP_MARK", mark}};
  start(false, false, 0, "", {deaf});
  BOOST_TEST(marked_processes(mark) == 1);
  // ~5 s until the ping, ~2 s until it times out, then the process goes.
  BOOST_TEST(wait_until([&] { return marked_processes(mark) == 0; },
                        std::chrono::seconds{60}));
  // A call brings it back.
  tool_call_request call;
  call.tool = "mcp__deaf__echo";
  call.args_json = R"({"text":"hello"})";
  auto out = rt->call_tool(call);
  BOOST_TEST(contains(out.result_json, "echo: hello"), out.result_json);
}

BOOST_FIXTURE_TEST_CASE(sampling_over_its_rate_is_refused, fixture) {
  start(false, true, 0, "", {}, 0);
  script(test::completion("", "mcp__everything__trigger_sampling_request",
                          R"({"prompt":"say hi","maxTokens":50})"));
  script(test::completion("done"));
  run("sample");
  BOOST_TEST(contains(last_tool_result(), "rate limit"), last_tool_result());
  BOOST_TEST(test::request_bodies(server).size() == 2u); // no model call
}

BOOST_FIXTURE_TEST_CASE(runtime_interrupt_cancels_an_mcp_call, fixture) {
  start(false);
  tool_call_request call;
  call.session_id = "s-int";
  call.tool = "mcp__everything__trigger_long_running_operation";
  call.args_json = R"({"duration":60,"steps":60})";
  std::atomic<bool> done{false};
  tool_outcome out;
  rt->call_tool_async(call, [&](tool_outcome o) {
    out = std::move(o);
    done = true;
  });
  // Interrupts before the call runs are no-ops: repeat until one lands.
  BOOST_REQUIRE(wait_until([&] {
    rt->interrupt("s-int", "test");
    return done.load();
  }));
  BOOST_TEST((contains(out.result_json, "cancel")
              || contains(out.result_json, "interrupt")),
             out.result_json);
  // The server is still there and answers at once.
  tool_call_request echo;
  echo.session_id = "s-int";
  echo.tool = "mcp__everything__echo";
  echo.args_json = R"({"message":"still up"})";
  auto r = rt->call_tool(echo);
  BOOST_TEST(contains(r.result_json, "Echo: still up"), r.result_json);
}

BOOST_FIXTURE_TEST_CASE(elicitation_asks_the_sessions_user, fixture) {
  start(false);
  std::mutex m;
  std::vector<clarify_prompt> asked;
  rt->set_clarify_callback([&](const clarify_prompt& p) -> std::string {
    std::lock_guard<std::mutex> g{m};
    asked.push_back(p);
    if (contains(p.question, "MCP server 'everything' asks:"))
      return "accept";
    if (p.question.rfind("String (name)", 0) == 0)
      return "Ada";
    if (p.question.rfind("Boolean (check)", 0) == 0)
      return "yes";
    return ""; // defaults
  });
  script(test::completion("", "mcp__everything__trigger_elicitation_request",
                          "{}"));
  script(test::completion("done"));
  run("ask me");
  auto out = last_tool_result();
  BOOST_TEST(contains(out, "Name: Ada"), out);
  BOOST_TEST(contains(out, "Agreed to terms: true"), out);
  BOOST_TEST(contains(out, "Favorite Integer: 42"), out); // the default
  std::lock_guard<std::mutex> g{m};
  BOOST_REQUIRE(asked.size() > 3u);
  BOOST_TEST(!asked.front().session_id.empty());
  BOOST_TEST(asked.front().choices.size() == 3u); // accept/decline/cancel
}

BOOST_FIXTURE_TEST_CASE(elicitation_is_declined_without_a_channel, fixture) {
  start(false); // no clarify channel: nobody can answer
  script(test::completion("", "mcp__everything__trigger_elicitation_request",
                          "{}"));
  script(test::completion("done"));
  run("ask me");
  BOOST_TEST(contains(last_tool_result(), "declined"), last_tool_result());
}

BOOST_FIXTURE_TEST_CASE(roots_are_the_runtime_working_directory, fixture) {
  start(false);
  script(test::completion("", "mcp__everything__get_roots_list", "{}"));
  script(test::completion("done"));
  run("roots?");
  auto cwd = std::filesystem::current_path().string();
  BOOST_TEST(contains(last_tool_result(), "file://" + cwd), last_tool_result());
}

BOOST_FIXTURE_TEST_CASE(list_changed_reaches_the_next_turn_only, fixture) {
  start(false, false, 0, "", {test::misbehaving_stdio("grow", "bad")});
  BOOST_TEST(tools_of(*rt).find("mcp__bad__fresh") == nullptr);
  // Turn 1 calls `grow`: the server adds `fresh` and says so.
  script(test::completion("", "mcp__bad__grow", "{}"));
  script(test::completion("done"));
  run("grow");
  // Re-registered at once...
  BOOST_REQUIRE(wait_until([&] {
    return tools_of(*rt).find("mcp__bad__fresh") != nullptr;
  }));
  // ...but turn 1 kept the tool list it started with.
  auto bodies = test::request_bodies(server);
  BOOST_REQUIRE(bodies.size() == 2u);
  BOOST_TEST(contains(bodies[1].find("tools")->dump(), "mcp__bad__grow"));
  BOOST_TEST(!contains(bodies[1].find("tools")->dump(), "mcp__bad__fresh"));
  // Turn 2 offers it, also through the server's toolset.
  script(test::completion("", "mcp__bad__fresh", R"({"text":"new"})"));
  script(test::completion("done"));
  turn_call c;
  c.prompt = "use the new tool";
  c.provider.provider = "custom";
  c.provider.base_url = server.url("/v1");
  c.provider.model = "m";
  c.provider.api_key = "sk-test-0123456789";
  c.stream = false;
  c.toolsets = {"mcp-bad"};
  auto out = rt->run_turn(c);
  BOOST_REQUIRE_MESSAGE(out.started, out.error);
  bodies = test::request_bodies(server);
  BOOST_REQUIRE(bodies.size() == 4u);
  BOOST_TEST(contains(bodies[2].find("tools")->dump(), "mcp__bad__fresh"));
  BOOST_TEST(contains(last_tool_result(), "echo: new"), last_tool_result());
}

// The dashboard's channel: with clarify.http pending, each question of
// the form waits in the pending registry and is answered there ("-" keeps
// a default: that channel takes no empty answer).
BOOST_FIXTURE_TEST_CASE(elicitation_through_the_pending_questions, fixture) {
  start(false);
  rt->use_pending_channels({false, true});
  script(test::completion("", "mcp__everything__trigger_elicitation_request",
                          "{}"));
  script(test::completion("done"));
  std::atomic<bool> finished{false};
  std::thread turn([&] {
    run("ask me");
    finished = true;
  });
  int answered = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{60};
  while (!finished) {
    if (std::chrono::steady_clock::now() > deadline || answered > 40) {
      for (auto& q : rt->pending_requests(pending_kind::clarify))
        rt->interrupt(q.session_id, "the test gave up");
      BOOST_ERROR("the form did not end");
      break;
    }
    for (auto& q : rt->pending_requests(pending_kind::clarify)) {
      std::string a = "-";
      if (contains(q.question, "MCP server 'everything' asks:"))
        a = "accept";
      else if (q.question.rfind("String (name)", 0) == 0)
        a = "Grace";
      else if (q.question.rfind("Boolean (check)", 0) == 0)
        a = "no";
      if (rt->answer_clarification(q.id, a) == pending_answer::ok)
        ++answered;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds{20});
  }
  turn.join();
  BOOST_TEST(answered > 3);
  auto out = last_tool_result();
  BOOST_TEST(contains(out, "Name: Grace"), out);
  BOOST_TEST(contains(out, "Agreed to terms: false"), out);
  BOOST_TEST(contains(out, "Favorite Integer: 42"), out);
}
