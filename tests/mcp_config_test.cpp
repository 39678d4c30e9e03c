// The pure parts of the MCP client: the `mcp_servers` config reader,
// ${VAR} references, the stdio environment, name sanitising, filters,
// schema normalisation, result shapes and the breaker (docs/mcp.md).
#define BOOST_TEST_MODULE mcp_config
#include <boost/test/unit_test.hpp>

#include <cstdlib>

#include "config/loader.hpp"
#include "config/mcp_config.hpp"
#include "config/options.hpp"
#include "tests/support/temp_dir.hpp"
#include "tools/mcp/mcp_catalog.hpp"
#include "tools/mcp/mcp_transport.hpp"

using namespace mibyan;

namespace {

result<options> parse(const std::string& yaml) {
  return parse_options(yaml, "config.yaml");
}

} // namespace

BOOST_AUTO_TEST_CASE(servers_parse_with_defaults_and_transports) {
  auto r = parse(R"(
mcp_servers:
  files:
    command: npx
    args: ["-y", "pkg", "/w"]
    env: {TOKEN: "${env:MY_TOKEN}"}
    tools: {include: "read_*", resources: no}
    lifecycle: {idle_timeout_seconds: 30}
    supports_parallel_tool_calls: "on"
  remote:
    url: https://example.test/mcp
    headers: {Authorization: "Bearer x"}
    keepalive_interval: 2
    sampling: {enabled: true, max_tokens_cap: 100, allowed_models: m1}
  legacy:
    url: http://127.0.0.1:9/sse
    transport: sse
    enabled: false
code_execution:
  mcp_in_scripts: true
)");
  BOOST_REQUIRE_MESSAGE(r.ok(), r.error);
  auto& s = r->mcp_servers;
  BOOST_REQUIRE(s.size() == 3u);
  BOOST_TEST(s[0].name == "files"); // sorted
  BOOST_TEST(s[0].transport == "stdio");
  BOOST_TEST(s[0].args.size() == 3u);
  BOOST_TEST(s[0].include.size() == 1u); // a single string is a list
  BOOST_TEST(!s[0].resources);
  BOOST_TEST(s[0].prompts);
  BOOST_TEST(s[0].idle_timeout_seconds == 30);
  BOOST_TEST(s[0].supports_parallel_tool_calls);
  BOOST_TEST(s[0].timeout == 300);
  BOOST_TEST(s[0].connect_timeout == 60);
  BOOST_TEST(s[1].name == "legacy");
  BOOST_TEST(s[1].transport == "sse");
  BOOST_TEST(!s[1].enabled);
  BOOST_TEST(s[2].transport == "http");
  BOOST_TEST(s[2].keepalive_interval == 5); // floored
  BOOST_TEST(s[2].sampling.enabled);
  BOOST_TEST(s[2].sampling.max_tokens_cap == 100);
  BOOST_TEST(s[2].sampling.allowed_models.size() == 1u);
  BOOST_TEST(r->code_execution.mcp_in_scripts);
}

BOOST_AUTO_TEST_CASE(bad_entries_are_clear_errors) {
  auto r = parse("mcp_servers:\n  x:\n    args: [a]\n");
  BOOST_TEST(r.error.find("mcp_servers.x: needs `command`") != std::string::npos,
             r.error);
  r = parse("mcp_servers:\n  x:\n    command: a\n    colour: red\n");
  BOOST_TEST(r.error.find("unknown key 'colour'") != std::string::npos,
             r.error);
  r = parse("mcp_servers:\n  x:\n    command: a\n    timeout: soon\n");
  BOOST_TEST(r.error.find("mcp_servers.x.timeout: expected an integer")
               != std::string::npos,
             r.error);
  r = parse("mcp_servers:\n  x:\n    url: ftp://h/\n");
  BOOST_TEST(r.error.find("http:// or https://") != std::string::npos,
             r.error);
  r = parse("mcp_servers:\n  x:\n    url: http://h/\n    transport: ws\n");
  BOOST_TEST(r.error.find("expected http or sse") != std::string::npos,
             r.error);
  // A bad boolean keeps the default (with a warning), it is no error.
  r = parse("mcp_servers:\n  x:\n    command: a\n    lazy: maybe\n");
  BOOST_REQUIRE(r.ok());
  BOOST_TEST(!r->mcp_servers[0].lazy);
}

BOOST_AUTO_TEST_CASE(references_resolve_from_environment_and_env_file) {
  options o;
  o.env_file["FROM_FILE"] = "filevalue";
  ::setenv("MIBYAN_MCP_TEST_VAR", "envvalue", 1);
  std::vector<std::string> unset;
  BOOST_TEST(resolve_mcp_refs("Bearer ${env:MIBYAN_MCP_TEST_VAR}", o)
             == "Bearer envvalue");
  BOOST_TEST(resolve_mcp_refs("${FROM_FILE}-${NOPE_X}", o, &unset)
             == "filevalue-");
  BOOST_TEST(unset.size() == 1u);
  BOOST_TEST(resolve_mcp_refs("plain", o) == "plain");
  ::unsetenv("MIBYAN_MCP_TEST_VAR");
}

BOOST_AUTO_TEST_CASE(stdio_environment_keeps_only_safe_variables) {
  auto env = mcp_stdio_environment(
    {"PATH=/bin", "HOME=/h", "OPENAI_API_KEY=sk-x", "XDG_RUNTIME_DIR=/r",
     "AWS_SECRET_ACCESS_KEY=y", "LANG=C", "RANDOM_THING=1"},
    {{"EXTRA", "1"}, {"LANG", "de"}});
  std::string all;
  for (auto& e : env)
    all += e + ";";
  BOOST_TEST(all == "PATH=/bin;HOME=/h;XDG_RUNTIME_DIR=/r;EXTRA=1;LANG=de;");
}

BOOST_AUTO_TEST_CASE(names_and_filters) {
  BOOST_TEST(mcp_tool_name("my-server", "search-repositories")
             == "mcp__my_server__search_repositories");
  BOOST_TEST(mcp_tool_name("a.b", "x y") == "mcp__a_b__x_y");
  BOOST_TEST(mcp_toolset_name("my-server") == "mcp-my-server");
  mcp_server_options s;
  BOOST_TEST(mcp_tool_admitted(s, "anything")); // neither list
  s.exclude = {"delete_*", "drop"};
  BOOST_TEST(!mcp_tool_admitted(s, "delete_file"));
  BOOST_TEST(!mcp_tool_admitted(s, "drop"));
  BOOST_TEST(mcp_tool_admitted(s, "get_file"));
  s.include = {"get_*", "drop"}; // include wins over exclude
  BOOST_TEST(mcp_tool_admitted(s, "drop"));
  BOOST_TEST(mcp_tool_admitted(s, "get_file"));
  BOOST_TEST(!mcp_tool_admitted(s, "put_file"));
  BOOST_TEST(!mcp_tool_admitted(s, "Get_file")); // case-sensitive
}

BOOST_AUTO_TEST_CASE(schema_normalisation) {
  BOOST_TEST(mcp_normalize_schema(nullptr).dump()
             == R"({"type":"object","properties":{}})");
  auto in = *json::parse(R"({"$schema":"x","type":"object",
    "properties":{"a":{"type":"string"}},"required":["a","ghost"]})").v;
  BOOST_TEST(mcp_normalize_schema(&in).dump()
             == R"({"type":"object","properties":{"a":{"type":"string"}},"required":["a"]})");
  auto bad = *json::parse(R"({"type":"object","required":["ghost"]})").v;
  BOOST_TEST(mcp_normalize_schema(&bad).dump()
             == R"({"type":"object","properties":{}})");
}

BOOST_AUTO_TEST_CASE(result_shapes) {
  test::temp_dir d;
  auto map = [&](const char* text) {
    return mcp_result_to_tool_result(*json::parse(text).v, d / "media").dump();
  };
  BOOST_TEST(map(R"({"isError":true,"content":[{"type":"text","text":"bad"}]})")
             == R"({"error":"bad"})");
  BOOST_TEST(map(R"({"content":[{"type":"text","text":"t"}],"structuredContent":{"k":1}})")
             == R"({"result":"t","structuredContent":{"k":1}})");
  BOOST_TEST(map(R"({"content":[],"structuredContent":{"k":1}})")
             == R"({"result":{"k":1}})");
  BOOST_TEST(map(R"({"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]})")
             == R"({"result":"a\nb"})");
  auto img = map(R"({"content":[{"type":"image","mimeType":"image/png","data":"aGVsbG8="}]})");
  BOOST_TEST(img.find("[image: " + d.path() + "/media/image-") != std::string::npos,
             img);
  BOOST_TEST(img.find("5 bytes") != std::string::npos, img);
}

BOOST_AUTO_TEST_CASE(breaker_opens_probes_and_resets) {
  mcp_breaker b;
  auto t0 = std::chrono::steady_clock::now();
  b.on_failure(t0);
  b.on_failure(t0);
  BOOST_TEST(!b.check("s", t0).has_value());
  b.on_failure(t0);
  auto msg = b.check("s", t0 + std::chrono::seconds{10});
  BOOST_REQUIRE(msg.has_value());
  BOOST_TEST(msg->find("after 3 consecutive failures") != std::string::npos);
  BOOST_TEST(msg->find("~51 s") != std::string::npos, *msg);
  // After the cooldown one probe may go; its failure re-arms the cooldown.
  auto later = t0 + std::chrono::seconds{61};
  BOOST_TEST(!b.check("s", later).has_value());
  b.on_failure(later);
  BOOST_TEST(b.check("s", later + std::chrono::seconds{1}).has_value());
  b.on_success();
  BOOST_TEST(!b.check("s", later + std::chrono::seconds{1}).has_value());
}

BOOST_AUTO_TEST_CASE(roots_and_elicitation_keys) {
  auto r = parse(R"(
mcp_servers:
  a:
    command: x
  b:
    command: x
    roots: [/srv/data, /tmp]
    elicitation: off
  c:
    command: x
    roots: false
)");
  BOOST_REQUIRE_MESSAGE(r.ok(), r.error);
  auto& s = r->mcp_servers;
  BOOST_TEST(s[0].roots); // defaults: offered, the runtime's cwd
  BOOST_TEST(s[0].root_dirs.empty());
  BOOST_TEST(s[0].elicitation);
  BOOST_TEST(s[1].roots);
  BOOST_TEST((s[1].root_dirs == std::vector<std::string>{"/srv/data", "/tmp"}));
  BOOST_TEST(!s[1].elicitation);
  BOOST_TEST(!s[2].roots);
  r = parse("mcp_servers:\n  x:\n    command: a\n    roots: [relative/dir]\n");
  BOOST_TEST(r.error.find("mcp_servers.x.roots: expected absolute "
                          "directories")
               != std::string::npos,
             r.error);
}
