// `mibyan mcp list [--json]` and `mibyan mcp test NAME` against our stdlib
// MCP server (tests/support/mcp_misbehaving_server.py) and a broken entry.
#define BOOST_TEST_MODULE mcp_cli
#include <boost/test/unit_test.hpp>

#include "base/json.hpp"
#include "tests/support/paths.hpp"
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mibyan;

namespace {

struct fixture {
  test::temp_dir home;
  test::process_options po;
  fixture() {
    po.env["MIBYAN_HOME"] = home.path();
    auto script = test::test_source_dir() + "/support/mcp_misbehaving_server.py";
    home.write("config.yaml",
               "mcp_servers:\n"
               "  good:\n"
               "    command: python3\n"
               "    args: [\"" + script + "\", good]\n"
               "    tools: {exclude: boom}\n"
               "  broken:\n"
               "    command: python3\n"
               "    args: [\"-c\", \"import sys; sys.stderr.write('no db\\\\n'); "
               "sys.exit(2)\"]\n"
               "    connect_timeout: 10\n"
               "  off:\n"
               "    command: python3\n"
               "    enabled: false\n");
  }
};

} // namespace

BOOST_FIXTURE_TEST_CASE(list_json_shows_states_and_tools, fixture) {
  auto r = test::run_mibyan({"mcp", "list", "--json"}, po);
  BOOST_TEST(r.exit_code == 1, r.err); // one server failed
  auto doc = json::parse(r.out);
  BOOST_REQUIRE_MESSAGE(doc, r.out);
  auto& servers = (*doc.v)["servers"].as_array();
  BOOST_REQUIRE(servers.size() == 3u);
  BOOST_TEST(servers[0]["name"].as_string() == "broken");
  BOOST_TEST(servers[0]["state"].as_string() == "failed");
  BOOST_TEST(servers[0]["error"].as_string().find("no db") != std::string::npos,
             servers[0].dump());
  BOOST_TEST(servers[1]["name"].as_string() == "good");
  BOOST_TEST(servers[1]["state"].as_string() == "connected");
  BOOST_TEST(servers[1]["tools"].dump()
             == R"(["mcp__good__echo","mcp__good__weird_name_v2"])");
  BOOST_TEST(servers[2]["state"].as_string() == "disabled");
}

BOOST_FIXTURE_TEST_CASE(test_command_connects_lists_and_pings, fixture) {
  auto r = test::run_mibyan({"mcp", "test", "good"}, po);
  BOOST_TEST(r.exit_code == 0, r.out + r.err);
  BOOST_TEST(r.out.find("connect + initialize + tools/list:")
             != std::string::npos);
  // The server answered an older version than offered: negotiated down.
  BOOST_TEST(r.out.find("protocol version: 2025-06-18") != std::string::npos,
             r.out);
  BOOST_TEST(r.out.find("- mcp__good__boom  (filtered out)")
             != std::string::npos, r.out);
  BOOST_TEST(r.out.find("ping 3:") != std::string::npos);
  BOOST_TEST(r.out.find("OK: 2 tools registered") != std::string::npos, r.out);
  r = test::run_mibyan({"mcp", "test", "nosuch"}, po);
  BOOST_TEST(r.exit_code == 2);
  r = test::run_mibyan({"mcp", "test", "broken"}, po);
  BOOST_TEST(r.exit_code == 1);
  BOOST_TEST(r.out.find("FAILED") != std::string::npos, r.out);
}
