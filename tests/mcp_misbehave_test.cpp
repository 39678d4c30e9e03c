// The MCP client against our own misbehaving stdio server
// (tests/support/mcp_misbehaving_server.py): garbage lines, an oversized
// message, a never-answering initialize, an id mismatch, a stderr flood;
// plus schema normalisation, credential redaction of isError texts, the
// name-collision rules and the script stub namespace.
#define BOOST_TEST_MODULE mcp_misbehave
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <filesystem>

#include "config/options.hpp"
#include "kernels/stub_generator.hpp"
#include "tests/support/mcp_servers.hpp"
#include "tests/support/temp_dir.hpp"
#include "tools/mcp/mcp_session.hpp"
#include "tools/mcp/mcp_tools.hpp"
#include "tools/registry.hpp"

using namespace mibyan;
using namespace std::chrono_literals;

namespace {

using clock_type = std::chrono::steady_clock;

struct fixture {
  test::temp_dir home;
  options cfg;
  fixture() { cfg.home = home.path(); }

  json::value echo(mcp_session& s, const char* text = "x",
                   std::chrono::seconds limit = 30s) {
    json::value a;
    a["text"] = text;
    return s.call_tool("echo", a, nullptr, clock_type::now() + limit,
                       home / "media");
  }

  tool_context context(std::atomic<bool>& never) {
    tool_context ctx;
    ctx.cfg = &cfg;
    ctx.home = cfg.home;
    ctx.cancelled = &never;
    ctx.deadline = clock_type::now() + 30s;
    return ctx;
  }
};

} // namespace

BOOST_FIXTURE_TEST_CASE(good_server_schemas_and_redacted_error, fixture) {
  cfg.mcp_servers = {test::misbehaving_stdio("good")};
  mcp_manager mgr{cfg, nullptr};
  mgr.start();
  tool_registry reg;
  register_core_tools(reg);
  auto warnings = mgr.register_tools(reg);
  BOOST_TEST(warnings.empty());
  // `required` naming an absent property is pruned; a non-object schema
  // becomes the empty object schema; the dotted name is sanitised.
  auto echo_tool = reg.find("mcp__bad__echo");
  BOOST_REQUIRE(echo_tool);
  BOOST_TEST(echo_tool->schema().find("required")->dump() == R"(["text"])");
  auto weird = reg.find("mcp__bad__weird_name_v2");
  BOOST_REQUIRE(weird);
  BOOST_TEST(weird->schema().dump() == R"({"type":"object","properties":{}})");
  BOOST_TEST(reg.find("mcp__bad__boom")->description() == "Always fails.");
  std::atomic<bool> never{false};
  auto ctx = context(never);
  auto r = dispatch_tool(reg, "mcp__bad__boom", json::value::make_object(),
                         ctx);
  auto err = r.get_string("error", "");
  BOOST_TEST(err.find("failed with token") != std::string::npos, r.dump());
  BOOST_TEST(err.find("sk-abcdefghijklmnopqrstuvwxyz123456")
               == std::string::npos,
             r.dump());
}

BOOST_FIXTURE_TEST_CASE(garbage_lines_are_skipped, fixture) {
  mcp_session s{test::misbehaving_stdio("garbage"), cfg, nullptr};
  auto st = s.connect();
  BOOST_REQUIRE_MESSAGE(st.ok(), st.error);
  auto r = echo(s, "through garbage");
  BOOST_TEST(r.get_string("result", "") == "echo: through garbage", r.dump());
}

BOOST_FIXTURE_TEST_CASE(oversized_message_ends_the_connection, fixture) {
  auto sc = test::misbehaving_stdio("oversized");
  sc.max_message_bytes = 1 << 20;
  mcp_session s{sc, cfg, nullptr};
  BOOST_REQUIRE(s.connect().ok());
  auto r = echo(s);
  BOOST_TEST(r.get_string("error", "").find("larger than 1048576 bytes")
               != std::string::npos,
             r.dump());
  // The next call starts the server again (and fails the same way).
  r = echo(s);
  BOOST_TEST(r.find("error") != nullptr);
}

BOOST_FIXTURE_TEST_CASE(never_answering_initialize_times_out, fixture) {
  auto sc = test::misbehaving_stdio("silent_init");
  sc.connect_timeout = 2;
  cfg.mcp_servers = {sc, test::misbehaving_stdio("good", "fine")};
  mcp_manager mgr{cfg, nullptr};
  mgr.start();
  auto s = mgr.find("bad");
  BOOST_TEST((s->current_state() == mcp_session::state::failed));
  BOOST_TEST(s->last_error().find("initialize failed") != std::string::npos,
             s->last_error());
  BOOST_TEST(s->pid() == -1); // the silent process was killed
  // The other server is unaffected.
  BOOST_TEST((mgr.find("fine")->current_state()
              == mcp_session::state::connected));
}

BOOST_FIXTURE_TEST_CASE(reply_with_wrong_id_is_ignored, fixture) {
  auto sc = test::misbehaving_stdio("id_mismatch");
  sc.timeout = 2;
  mcp_session s{sc, cfg, nullptr};
  BOOST_REQUIRE(s.connect().ok());
  auto r = echo(s);
  BOOST_TEST(r.get_string("error", "").find("timed out") != std::string::npos,
             r.dump());
  BOOST_TEST(s.ping(10s).ok()); // the connection itself is fine
}

BOOST_FIXTURE_TEST_CASE(stderr_flood_is_drained_and_capped, fixture) {
  mcp_session s{test::misbehaving_stdio("stderr_flood"), cfg, nullptr};
  BOOST_REQUIRE(s.connect().ok());
  for (int i = 0; i < 2; ++i) {
    auto r = echo(s, "flooded", 60s);
    BOOST_TEST(r.get_string("result", "") == "echo: flooded", r.dump());
  }
  BOOST_TEST(s.stderr_tail().size() <= 4096u);
  auto size = std::filesystem::file_size(home / "logs/mcp-stderr.log");
  BOOST_TEST(size < (9u << 20)); // capped at 8 MiB per process
}

BOOST_FIXTURE_TEST_CASE(collisions_fail_closed, fixture) {
  // "a-b" and "a_b" sanitise to the same prefix: the later one is
  // rejected. A server tool named like a built-in cannot exist with the
  // prefix, so the built-in check is shown with a registry entry.
  cfg.mcp_servers = {test::misbehaving_stdio("good", "a-b"),
                     test::misbehaving_stdio("good", "a_b")};
  mcp_manager mgr{cfg, nullptr};
  mgr.start();
  tool_registry reg;
  auto warnings = mgr.register_tools(reg);
  BOOST_TEST(warnings.size() == 3u); // echo, boom, weird_name_v2 of a_b
  BOOST_TEST(warnings.front().find("collides with a tool of server 'a-b'")
               != std::string::npos,
             warnings.front());
  BOOST_TEST(mgr.server_tools().at("a-b").size() == 3u);
  BOOST_TEST(mgr.server_tools().at("a_b").empty());
}

namespace {

// A non-MCP tool that happens to own an MCP-shaped name.
struct builtin_echo : tool {
  const char* name() const override { return "mcp__bad__echo"; }
  const char* toolset() const override { return "host"; }
  std::string description() const override { return "host tool"; }
  json::value schema() const override {
    return *json::parse(R"({"type":"object","properties":{}})").v;
  }
  json::value run(const json::value&, const tool_context&) const override {
    json::value r;
    r["result"] = "host";
    return r;
  }
};

} // namespace

BOOST_FIXTURE_TEST_CASE(builtin_wins_a_collision, fixture) {
  cfg.mcp_servers = {test::misbehaving_stdio("good")};
  mcp_manager mgr{cfg, nullptr};
  mgr.start();
  tool_registry reg;
  reg.add(std::make_unique<builtin_echo>());
  auto warnings = mgr.register_tools(reg);
  BOOST_REQUIRE(warnings.size() == 1u);
  BOOST_TEST(warnings[0].find("is a built-in tool") != std::string::npos,
             warnings[0]);
  BOOST_TEST(reg.find("mcp__bad__echo")->description() == "host tool");
  BOOST_TEST(mgr.server_tools().at("bad").size() == 2u);
}

BOOST_FIXTURE_TEST_CASE(script_stub_namespace, fixture) {
  cfg.mcp_servers = {test::misbehaving_stdio("good")};
  mcp_manager mgr{cfg, nullptr};
  mgr.start();
  tool_registry reg;
  mgr.register_tools(reg);
  auto specs = mgr.script_specs();
  BOOST_REQUIRE(specs.size() == 3u);
  std::vector<std::string> names;
  for (auto& s : specs)
    names.push_back(s.name);
  auto stub = generate_stub(names, specs);
  BOOST_TEST(stub.find("setattr(getattr(mcp, \"bad\"), \"echo\", "
                       "_mcp_function(\"mcp__bad__echo\"")
             != std::string::npos);
  // The generated module is valid Python.
  test::temp_dir d;
  auto path = d.write("mibyan_tools.py", stub);
  auto rc = std::system(("python3 -c 'import sys; sys.path.insert(0, \""
                         + d.path()
                         + "\"); import mibyan_tools as m; "
                           "assert callable(m.mcp.bad.echo); "
                           "assert \"mcp\" in m.__all__' ")
                          .c_str());
  BOOST_TEST(rc == 0);
}
