// The MCP client over stdio against the real npm servers
// (@modelcontextprotocol/server-everything and server-filesystem):
// handshake, listing with filters, results, isError, a large result,
// timeout and cancellation of a slow tool, a crash mid-call and the
// reconnect, the scrubbed environment, sequential vs parallel calls.
#define BOOST_TEST_MODULE mcp_stdio
#include <boost/test/unit_test.hpp>

#include <signal.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "config/options.hpp"
#include "tests/support/mcp_servers.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wait_until.hpp"
#include "tools/mcp/mcp_session.hpp"
#include "tools/mcp/mcp_tools.hpp"
#include "tools/registry.hpp"

using namespace mibyan;
using mibyan::test::wait_until;
using namespace std::chrono_literals;

using mibyan::test::mcp_npm_presence;
BOOST_TEST_GLOBAL_FIXTURE(mcp_npm_presence);

namespace {

using clock_type = std::chrono::steady_clock;

struct fixture {
  test::temp_dir home;
  options cfg;
  fixture() { cfg.home = home.path(); }

  json::value call(mcp_session& s, const std::string& tool, json::value args,
                   const std::atomic<bool>* cancel = nullptr,
                   std::chrono::seconds limit = 60s) {
    return s.call_tool(tool, args, cancel, clock_type::now() + limit,
                       home / "media");
  }
};

json::value args_of(const char* text) {
  return *json::parse(text).v;
}

} // namespace

BOOST_FIXTURE_TEST_CASE(filesystem_handshake_filters_and_results, fixture) {
  test::temp_dir root;
  root.write("hello.txt", "hello from mcp\n");
  root.write("big.txt", std::string(600000, 'z'));
  auto sc = test::filesystem_stdio(root.path());
  sc.include = {"read_text_file", "list_*"};
  cfg.mcp_servers = {sc};
  mcp_manager mgr{cfg, nullptr};
  mgr.start();
  auto s = mgr.find("files");
  BOOST_REQUIRE(s);
  BOOST_REQUIRE_MESSAGE(s->current_state() == mcp_session::state::connected,
                        s->last_error());
  BOOST_TEST(s->tools().size() > 5u); // the whole catalog is known
  tool_registry reg;
  auto warnings = mgr.register_tools(reg);
  BOOST_TEST(warnings.empty());
  auto names = mgr.server_tools().at("files");
  // include wins: only read_text_file and the list_* tools.
  auto has = [&](const char* n) {
    return std::find(names.begin(), names.end(), n) != names.end();
  };
  BOOST_TEST(has("mcp__files__read_text_file"));
  BOOST_TEST(has("mcp__files__list_directory"));
  for (auto& n : names)
    BOOST_TEST((n == "mcp__files__read_text_file"
                || n.rfind("mcp__files__list_", 0) == 0),
               n);
  auto t = reg.find("mcp__files__read_text_file");
  BOOST_REQUIRE(t);
  BOOST_TEST(std::string{t->toolset()} == "mcp-files");
  BOOST_TEST(t->schema().get_string("type", "") == "object");

  // A text result through the registry's dispatch.
  tool_context ctx;
  ctx.cfg = &cfg;
  ctx.home = cfg.home;
  std::atomic<bool> never{false};
  ctx.cancelled = &never;
  ctx.deadline = clock_type::now() + 60s;
  json::value a;
  a["path"] = root / "hello.txt";
  auto r = dispatch_tool(reg, "mcp__files__read_text_file", a, ctx);
  BOOST_TEST(r.get_string("result", "") == "hello from mcp\n", r.dump());

  // isError: a path outside the allowed directory.
  a["path"] = "/etc/hostname";
  r = dispatch_tool(reg, "mcp__files__read_text_file", a, ctx);
  BOOST_TEST(r.find("error") != nullptr, r.dump());
  BOOST_TEST(r.find("result") == nullptr);

  // A large result arrives whole.
  a["path"] = root / "big.txt";
  r = dispatch_tool(reg, "mcp__files__read_text_file", a, ctx);
  BOOST_TEST(r.get_string("result", "").size() == 600000u);
  mgr.shutdown();
}

BOOST_FIXTURE_TEST_CASE(exclude_filter_and_utility_tools, fixture) {
  auto sc = test::everything_stdio();
  sc.exclude = {"get-*", "echo"};
  cfg.mcp_servers = {sc};
  mcp_manager mgr{cfg, nullptr};
  mgr.start();
  tool_registry reg;
  mgr.register_tools(reg);
  BOOST_TEST(reg.find("mcp__everything__echo") == nullptr);
  BOOST_TEST(reg.find("mcp__everything__get_sum") == nullptr);
  BOOST_TEST(reg.find("mcp__everything__trigger_long_running_operation")
             != nullptr);
  // server-everything advertises resources and prompts.
  BOOST_TEST(reg.find("mcp__everything__list_resources") != nullptr);
  BOOST_TEST(reg.find("mcp__everything__read_resource") != nullptr);
  BOOST_TEST(reg.find("mcp__everything__list_prompts") != nullptr);
  BOOST_TEST(reg.find("mcp__everything__get_prompt") != nullptr);
  tool_context ctx;
  ctx.cfg = &cfg;
  ctx.home = cfg.home;
  std::atomic<bool> never{false};
  ctx.cancelled = &never;
  ctx.deadline = clock_type::now() + 60s;
  auto r = dispatch_tool(reg, "mcp__everything__list_prompts",
                         json::value::make_object(), ctx);
  BOOST_TEST(r.find("result") != nullptr, r.dump());
  mgr.shutdown();
}

BOOST_FIXTURE_TEST_CASE(everything_results_timeout_cancel_crash, fixture) {
  ::setenv("OPENAI_API_KEY", "sk-host-secret-should-not-leak-123456", 1);
  auto sc = test::everything_stdio();
  sc.env = {{"MIBYAN_MCP_MARK", "marked"}};
  mcp_session s{sc, cfg, nullptr};
  auto st = s.connect();
  BOOST_REQUIRE_MESSAGE(st.ok(), st.error);

  auto r = call(s, "echo", args_of(R"({"message":"hi"})"));
  BOOST_TEST(r.get_string("result", "") == "Echo: hi", r.dump());
  r = call(s, "get-sum", args_of(R"({"a":2,"b":40})"));
  BOOST_TEST(r.get_string("result", "").find("42") != std::string::npos,
             r.dump());
  r = call(s, "get-structured-content", args_of(R"({"location":"New York"})"));
  BOOST_TEST(r.find("structuredContent") != nullptr, r.dump());
  r = call(s, "get-tiny-image", json::value::make_object());
  BOOST_TEST(r.get_string("result", "").find("[image: ") != std::string::npos,
             r.dump());

  // The environment: safe variables and `env` only.
  r = call(s, "get-env", json::value::make_object());
  auto env_text = r.get_string("result", "");
  BOOST_TEST(env_text.find("MIBYAN_MCP_MARK") != std::string::npos);
  BOOST_TEST(env_text.find("OPENAI_API_KEY") == std::string::npos);
  BOOST_TEST(env_text.find("PATH") != std::string::npos);

  // A slow tool past the per-call timeout: error, the server stays usable.
  auto short_cfg = sc;
  short_cfg.timeout = 1;
  mcp_session quick{short_cfg, cfg, nullptr};
  BOOST_REQUIRE(quick.connect().ok());
  r = call(quick, "trigger-long-running-operation",
           args_of(R"({"duration":20,"steps":20})"));
  BOOST_TEST(r.get_string("error", "").find("timed out") != std::string::npos,
             r.dump());
  r = call(quick, "echo", args_of(R"({"message":"after timeout"})"));
  BOOST_TEST(r.get_string("result", "") == "Echo: after timeout", r.dump());

  // Cancellation (an interrupt) while the slow tool runs.
  std::atomic<bool> cancel{false};
  std::thread canceller([&] {
    wait_until([&] { return s.active_calls() > 0; });
    cancel = true;
  });
  r = call(s, "trigger-long-running-operation",
           args_of(R"({"duration":30,"steps":30})"), &cancel);
  canceller.join();
  BOOST_TEST(r.get_string("error", "").find("interrupted") != std::string::npos,
             r.dump());
  r = call(s, "echo", args_of(R"({"message":"after cancel"})"));
  BOOST_TEST(r.get_string("result", "") == "Echo: after cancel", r.dump());

  // The server crashes mid-call: an error result, then a reconnect.
  int pid = s.pid();
  BOOST_REQUIRE(pid > 0);
  std::thread killer([&] {
    wait_until([&] { return s.active_calls() > 0; });
    ::kill(-pid, SIGKILL);
  });
  r = call(s, "trigger-long-running-operation",
           args_of(R"({"duration":30,"steps":30})"));
  killer.join();
  BOOST_TEST(r.get_string("error", "").find("unavailable") != std::string::npos,
             r.dump());
  r = call(s, "echo", args_of(R"({"message":"reconnected"})"));
  BOOST_TEST(r.get_string("result", "") == "Echo: reconnected", r.dump());
  BOOST_TEST(s.pid() != pid);
  BOOST_TEST(s.ping(10s).ok());
  s.close();
  quick.close();
  // The process group is gone after close.
  BOOST_TEST(wait_until([&] { return ::kill(-pid, 0) != 0; }));
  ::unsetenv("OPENAI_API_KEY");
}

BOOST_FIXTURE_TEST_CASE(sequential_unless_parallel_opt_in, fixture) {
  // Sequential (default): a second call waits for the first and gives up
  // at its own deadline.
  auto sc = test::everything_stdio();
  mcp_session seq{sc, cfg, nullptr};
  BOOST_REQUIRE(seq.connect().ok());
  std::atomic<bool> started{false};
  std::thread slow([&] {
    started = true;
    call(seq, "trigger-long-running-operation",
         args_of(R"({"duration":3,"steps":3})"));
  });
  BOOST_REQUIRE(wait_until([&] { return seq.active_calls() == 1; }));
  auto r = call(seq, "echo", args_of(R"({"message":"x"})"), nullptr, 1s);
  BOOST_TEST(r.get_string("error", "").find("earlier call") != std::string::npos,
             r.dump());
  slow.join();

  // Parallel opt-in: the second call completes while the first runs.
  sc.supports_parallel_tool_calls = true;
  mcp_session par{sc, cfg, nullptr};
  BOOST_REQUIRE(par.connect().ok());
  std::atomic<bool> slow_done{false};
  std::thread slow2([&] {
    call(par, "trigger-long-running-operation",
         args_of(R"({"duration":3,"steps":3})"));
    slow_done = true;
  });
  BOOST_REQUIRE(wait_until([&] { return par.active_calls() == 1; }));
  r = call(par, "echo", args_of(R"({"message":"y"})"), nullptr, 30s);
  BOOST_TEST(r.get_string("result", "") == "Echo: y", r.dump());
  BOOST_TEST(!slow_done.load());
  slow2.join();
}

BOOST_FIXTURE_TEST_CASE(lazy_server_uses_schema_cache, fixture) {
  auto sc = test::everything_stdio();
  sc.lazy = true;
  cfg.mcp_servers = {sc};
  {
    mcp_manager first{cfg, nullptr}; // no cache yet: connects, writes it
    first.start();
    BOOST_TEST((first.find("everything")->current_state()
                == mcp_session::state::connected));
  }
  mcp_manager mgr{cfg, nullptr};
  mgr.start();
  auto s = mgr.find("everything");
  BOOST_TEST((s->current_state() == mcp_session::state::idle));
  BOOST_TEST(s->pid() == -1); // not started
  tool_registry reg;
  mgr.register_tools(reg);
  BOOST_REQUIRE(reg.find("mcp__everything__echo") != nullptr);
  auto r = call(*s, "echo", args_of(R"({"message":"lazy"})"));
  BOOST_TEST(r.get_string("result", "") == "Echo: lazy", r.dump());
  BOOST_TEST((s->current_state() == mcp_session::state::connected));
}

BOOST_FIXTURE_TEST_CASE(failing_server_reports_stderr_without_blocking, fixture) {
  mcp_server_options bad;
  bad.name = "broken";
  bad.transport = "stdio";
  bad.command = "sh";
  bad.args = {"-c", "echo 'fatal: cannot open database' >&2; exit 3"};
  bad.connect_timeout = 20;
  cfg.mcp_servers = {bad, test::everything_stdio()};
  mcp_manager mgr{cfg, nullptr};
  mgr.start();
  auto b = mgr.find("broken");
  BOOST_TEST((b->current_state() == mcp_session::state::failed));
  BOOST_TEST(b->last_error().find("cannot open database") != std::string::npos,
             b->last_error());
  BOOST_TEST((mgr.find("everything")->current_state()
              == mcp_session::state::connected));
  // The stderr log under $MIBYAN_HOME.
  BOOST_TEST(home.read("logs/mcp-stderr.log").find("[broken] fatal")
             != std::string::npos);
}
