// The MCP client's capabilities against the real
// @modelcontextprotocol/server-everything over stdio and Streamable HTTP:
// the tools it registers after initialization because Mibyan offers
// sampling, elicitation and roots are listed (tools/list_changed) and
// work - a sampling call answered by the sampling handler, an elicitation
// answered by the elicitation handler (accepted with values and the
// schema's defaults, declined without a handler), the roots listed as the
// configured directory - and protocol 2025-11-25 is negotiated.
#define BOOST_TEST_MODULE mcp_client_caps
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <mutex>

#include "base/http_client.hpp"
#include "config/options.hpp"
#include "tests/support/mcp_servers.hpp"
#include "tests/support/temp_dir.hpp"
#include "tools/mcp/mcp_elicitation.hpp"
#include "tools/mcp/mcp_session.hpp"
#include "tools/mcp/mcp_tools.hpp"

using namespace mibyan;
using namespace std::chrono_literals;
using mibyan::test::mcp_npm_presence;
BOOST_TEST_GLOBAL_FIXTURE(mcp_npm_presence);

namespace {

using clock_type = std::chrono::steady_clock;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

void exercise(mcp_server_options sc) {
  test::temp_dir home;
  options cfg;
  cfg.home = home.path();
  http_client http;
  sc.name = "everything";
  sc.sampling.enabled = true;
  sc.root_dirs = {home.path()};
  cfg.mcp_servers = {sc};
  mcp_manager mgr{cfg, &http};
  std::mutex m;
  std::vector<mcp_elicitation_request> asked;
  json::value answer;
  mgr.set_sampling_handler([](const std::string& server,
                              const json::value& params,
                              std::chrono::milliseconds) -> result<json::value> {
    json::value content;
    content["type"] = "text";
    content["text"] = "sampled by " + server + ": "
                      + params.find("messages")->dump().substr(0, 200);
    json::value out;
    out["role"] = "assistant";
    out["content"] = std::move(content);
    out["model"] = "scripted";
    out["stopReason"] = "endTurn";
    return out;
  });
  mgr.set_elicitation_handler([&](const mcp_elicitation_request& r) {
    std::lock_guard<std::mutex> g{m};
    asked.push_back(r);
    return answer;
  });
  mgr.start();
  auto s = mgr.find("everything");
  BOOST_REQUIRE_MESSAGE((s->current_state() == mcp_session::state::connected),
                        s->last_error());
  BOOST_TEST(s->protocol_version() == "2025-11-25");
  tool_registry reg;
  mgr.register_tools(reg);
  // Registered after initialization, because of the capabilities offered.
  for (auto name : {"mcp__everything__trigger_sampling_request",
                    "mcp__everything__trigger_elicitation_request",
                    "mcp__everything__get_roots_list"})
    BOOST_TEST(reg.find(name) != nullptr, name);

  auto media = home / "media";
  mcp_caller caller{"session-7", home.path()};
  auto call = [&](const char* tool, const char* args) {
    return s->call_tool(tool, *json::parse(args).v, nullptr,
                        clock_type::now() + 60s, media, &caller);
  };
  // Sampling.
  auto r = call("trigger-sampling-request", R"({"prompt":"say hi"})");
  BOOST_TEST(contains(r.dump(), "sampled by everything"), r.dump());
  BOOST_TEST(contains(r.dump(), "say hi"), r.dump());

  // Elicitation, accepted with two values: the schema's defaults fill
  // the rest.
  answer = *json::parse(R"({"action":"accept",)"
                        R"("content":{"name":"Ada","check":true}})")
              .v;
  r = call("trigger-elicitation-request", "{}");
  auto text = r.dump();
  BOOST_TEST(contains(text, "Name: Ada"), text);
  BOOST_TEST(contains(text, "Agreed to terms: true"), text);
  BOOST_TEST(contains(text, "Favorite Integer: 42"), text); // a default
  {
    std::lock_guard<std::mutex> g{m};
    BOOST_REQUIRE(asked.size() == 1u);
    BOOST_TEST(asked.front().session_id == "session-7");
    BOOST_TEST(asked.front().schema.find("properties") != nullptr);
  }
  // An answer that does not fit the form (a required field missing) is
  // sent as cancel.
  answer = *json::parse(R"({"action":"accept","content":{"check":true}})").v;
  r = call("trigger-elicitation-request", "{}");
  BOOST_TEST(contains(r.dump(), "cancel"), r.dump());
  // Nobody to ask: declined.
  mgr.set_elicitation_handler(nullptr);
  r = call("trigger-elicitation-request", "{}");
  BOOST_TEST(contains(r.dump(), "declined"), r.dump());

  // Roots: the configured directory as a file:// URI.
  r = call("get-roots-list", "{}");
  BOOST_TEST(contains(r.dump(), "file://" + home.path()), r.dump());
  mgr.shutdown();
}

// Roots follow the session whose call is in flight: two sessions with
// their own working directories each see their own directory through the
// server's get-roots-list (server-everything caches the roots and asks
// again on notifications/roots/list_changed, which the client sends when
// the caller's roots differ from its last answer).
void roots_per_session(mcp_server_options sc) {
  test::temp_dir home, dir_a, dir_b;
  options cfg;
  cfg.home = home.path();
  http_client http;
  sc.name = "everything";
  cfg.mcp_servers = {sc};
  mcp_manager mgr{cfg, &http};
  mgr.set_roots_provider([&] { return std::vector<std::string>{home.path()}; });
  mgr.start();
  auto s = mgr.find("everything");
  BOOST_REQUIRE_MESSAGE((s->current_state() == mcp_session::state::connected),
                        s->last_error());
  auto roots_of = [&](const std::string& session, const std::string& cwd) {
    mcp_caller caller{session, cwd};
    return s->call_tool("get-roots-list", json::value::make_object(), nullptr,
                        clock_type::now() + 60s, home / "media", &caller)
      .dump();
  };
  auto a = roots_of("session-a", dir_a.path());
  BOOST_TEST(contains(a, "file://" + dir_a.path()), a);
  BOOST_TEST(!contains(a, "file://" + home.path()), a);
  auto b = roots_of("session-b", dir_b.path());
  BOOST_TEST(contains(b, "file://" + dir_b.path()), b);
  BOOST_TEST(!contains(b, "file://" + dir_a.path()), b);
  a = roots_of("session-a", dir_a.path());
  BOOST_TEST(contains(a, "file://" + dir_a.path()), a);
  // A call without a working directory: the provider's roots.
  auto none = roots_of("session-c", "");
  BOOST_TEST(contains(none, "file://" + home.path()), none);
  mgr.shutdown();
}

} // namespace

// (stdio only: server-everything's HTTP mode sends its roots/list on the
// GET stream, which a request can race at the session's start.)
BOOST_AUTO_TEST_CASE(roots_follow_the_calling_session_stdio) {
  roots_per_session(test::everything_stdio());
}

BOOST_AUTO_TEST_CASE(stdio) {
  exercise(test::everything_stdio());
}

BOOST_AUTO_TEST_CASE(streamable_http) {
  test::everything_http_server server{"streamableHttp"};
  BOOST_REQUIRE_MESSAGE(!server.url().empty(), "server-everything did not "
                                               "start");
  mcp_server_options sc;
  sc.transport = "http";
  sc.url = server.url();
  sc.connect_timeout = 30;
  sc.timeout = 60;
  exercise(sc);
}

// The form helpers: a schema read as fields, answers typed and checked.
BOOST_AUTO_TEST_CASE(form_fields_and_answers) {
  auto schema = *json::parse(R"({"type":"object","properties":{
    "name":{"type":"string","minLength":2},
    "n":{"type":"integer","minimum":1,"maximum":9,"default":3},
    "ok":{"type":"boolean"},
    "pet":{"type":"string","oneOf":[{"const":"c","title":"Cat"},
                                    {"const":"d","title":"Dog"}]},
    "tags":{"type":"array","items":{"enum":["a","b","c"]},"maxItems":2},
    "mail":{"type":"string","format":"email"}},
    "required":["name"]})").v;
  auto fields = mcp_parse_form(schema);
  BOOST_REQUIRE(fields);
  BOOST_REQUIRE(fields->size() == 6u);
  auto& f = *fields;
  BOOST_TEST(mcp_form_value(f[1], "7")->as_int() == 7);
  BOOST_TEST(!mcp_form_value(f[1], "12"));      // over the maximum
  BOOST_TEST(!mcp_form_value(f[1], "2.5"));     // not whole
  BOOST_TEST(mcp_form_value(f[2], "yes")->as_bool());
  BOOST_TEST(mcp_form_value(f[3], "dog")->as_string() == "d"); // by label
  BOOST_TEST(mcp_form_value(f[3], "1")->as_string() == "c");   // by number
  BOOST_TEST(mcp_form_value(f[4], "a, c")->dump() == R"(["a","c"])");
  BOOST_TEST(!mcp_form_value(f[4], "a,b,c"));   // too many
  BOOST_TEST(!mcp_form_value(f[5], "not-an-address"));
  BOOST_TEST(!mcp_form_value(f[0], "x"));       // too short
  auto done = mcp_complete_form(f, *json::parse(R"({"name":"Al","x":1})").v);
  BOOST_REQUIRE(done);
  BOOST_TEST(done->dump() == R"({"name":"Al","n":3})");
  BOOST_TEST(!mcp_complete_form(f, *json::parse(R"({"n":3})").v));
  BOOST_TEST(!mcp_complete_form(f, *json::parse(R"({"name":5})").v));
  // Not a form of primitives.
  BOOST_TEST(!mcp_parse_form(*json::parse(
    R"({"type":"object","properties":{"o":{"type":"object"}}})").v));
  BOOST_TEST(!mcp_parse_form(*json::parse(R"("text")").v));

  // Through a clarify channel: accept, then one answer per field (Enter
  // keeps a default, an invalid answer is asked again).
  std::vector<std::string> answers = {"accept", "Al", "", "maybe", "yes",
                                      "Dog", "b", ""};
  std::vector<std::string> questions;
  size_t next = 0;
  std::atomic<bool> never{false};
  mcp_elicitation_request r;
  r.server = "srv";
  r.message = "Tell me";
  r.schema = schema;
  r.cancelled = &never;
  auto out = mcp_elicit_by_questions(
    r,
    [&](const clarify_prompt& p) {
      questions.push_back(p.question);
      return next < answers.size() ? answers[next++] : std::string{};
    },
    5s);
  BOOST_TEST(out.get_string("action", "") == "accept", out.dump());
  BOOST_TEST(out.find("content")->dump()
               == R"({"name":"Al","n":3,"ok":true,"pet":"d","tags":["b"]})",
             out.dump());
  BOOST_TEST(contains(questions.front(), "MCP server 'srv' asks: Tell me"));
  BOOST_TEST(contains(questions[4], "not valid"), questions[4]);
  // Declined at the first question; no answer at all is cancel.
  answers = {"decline"};
  next = 0;
  out = mcp_elicit_by_questions(
    r, [&](const clarify_prompt&) { return answers[next++]; }, 5s);
  BOOST_TEST(out.dump() == R"({"action":"decline"})");
  out = mcp_elicit_by_questions(
    r, [&](const clarify_prompt&) { return std::string{}; }, 5s);
  BOOST_TEST(out.dump() == R"({"action":"cancel"})");
}
