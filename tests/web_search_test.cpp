#define BOOST_TEST_MODULE web_search
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "config/options.hpp"
#include "base/http_client.hpp"
#include "base/json.hpp"
#include "tools/core_tools.hpp"
#include "tools/registry.hpp"
#include "tools/search_backend.hpp"
#include "tests/support/http_server.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wait_until.hpp"

using namespace mibyan;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

namespace {

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

struct fixture {
  test::http_server server;
  test::temp_dir home;
  http_client client;
  options cfg;
  std::atomic<bool> cancelled{false};
  tool_registry reg;
  tool_context ctx;

  fixture() {
    // Hermetic: keys from the developer's environment must not leak in.
    ::unsetenv("BRAVE_API_KEY");
    ::unsetenv("TAVILY_API_KEY");
    cfg.home = home.path();
    cfg.web.brave_url = server.url("/brave");
    cfg.web.tavily_url = server.url("/tavily");
    reg.add(make_web_search_tool());
    ctx.cwd = home.path();
    ctx.home = home.path();
    ctx.cfg = &cfg;
    ctx.http = &client;
    ctx.cancelled = &cancelled;
    ctx.deadline = clock_type::now() + 60s;
  }

  json::value run(const std::string& args) {
    return dispatch_tool(reg, "web_search", std::string_view{args}, ctx);
  }

  // Returns data.web of a successful search.
  json::array hits(const std::string& args) {
    auto r = run(args);
    BOOST_REQUIRE_MESSAGE(r.get_bool("success", false), r.dump());
    return r["data"]["web"].as_array();
  }

  // Returns the request log entries whose path starts with `prefix`.
  std::vector<json::value> logged(const std::string& prefix) {
    auto parsed = json::parse(server.requests());
    BOOST_REQUIRE(parsed);
    std::vector<json::value> out;
    for (auto& r : parsed.v->as_array())
      if (r.get_string("path").rfind(prefix, 0) == 0)
        out.push_back(r);
    return out;
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(web_search_suite, fixture)

BOOST_AUTO_TEST_CASE(tool_metadata) {
  auto t = reg.find("web_search");
  BOOST_REQUIRE(t != nullptr);
  BOOST_TEST(std::string{t->toolset()} == "web");
  BOOST_TEST(t->parallel_safe());
  BOOST_TEST(t->deadline(json::value::make_object(), cfg).count()
             > cfg.web.fetch_timeout * 1000);
}

BOOST_AUTO_TEST_CASE(searxng_results_are_mapped) {
  cfg.web.search_backend = "searxng";
  cfg.web.searxng_url = server.url("/searxng");
  auto web = hits(R"({"query":"hello world & more","limit":3})");
  BOOST_REQUIRE(web.size() == 3u);
  BOOST_TEST(web[0].get_string("title") == "Result 1: hello world & more");
  BOOST_TEST(web[0].get_string("url") == "https://example.com/1");
  BOOST_TEST(web[0].get_string("description")
             == "Snippet 1 about hello world & more");
  for (int i = 0; i < 3; ++i)
    BOOST_TEST(web[static_cast<size_t>(i)].get_int("position", 0) == i + 1);
  auto log = logged("/searxng/search");
  BOOST_REQUIRE(log.size() == 1u);
  BOOST_TEST(log[0].get_string("path")
             == "/searxng/search?q=hello%20world%20%26%20more&format=json");
  // Default limit is 5; the server has 30.
  BOOST_TEST(hits(R"({"query":"x"})").size() == 5u);
  BOOST_TEST(hits(R"({"query":"x","limit":100})").size() == 30u);
}

BOOST_AUTO_TEST_CASE(searxng_url_variants_and_auto_pick) {
  // Auto-picked when only searxng_url is set; trailing slash and an explicit
  // /search path both work.
  for (auto base : {server.url("/searxng/"), server.url("/searxng/search")}) {
    cfg.web.searxng_url = base;
    BOOST_TEST(hits(R"({"query":"q","limit":2})").size() == 2u, base);
  }
  BOOST_TEST(logged("/searxng/search?q=q&format=json").size() == 2u);
}

BOOST_AUTO_TEST_CASE(brave_sends_the_key_and_respects_limit) {
  cfg.web.search_backend = "brave";
  cfg.env_file["BRAVE_API_KEY"] = "test-brave-key";
  auto web = hits(R"({"query":"cats","limit":3})");
  BOOST_REQUIRE(web.size() == 3u);
  BOOST_TEST(web[0].get_string("title") == "Brave 1: cats");
  BOOST_TEST(web[0].get_string("url") == "https://brave.example/1");
  // HTML in Brave descriptions is reduced to text.
  BOOST_TEST(web[0].get_string("description") == "About cats & more 1");
  BOOST_TEST(web[2].get_int("position", 0) == 3);
  auto log = logged("/brave");
  BOOST_REQUIRE(log.size() == 1u);
  BOOST_TEST(log[0].get_string("path") == "/brave?q=cats&count=3");
  BOOST_TEST(log[0]["headers"].get_string("X-Subscription-Token")
             == "test-brave-key");
  // Brave returns at most 20.
  BOOST_TEST(hits(R"({"query":"cats","limit":50})").size() == 20u);
  BOOST_TEST(logged("/brave?q=cats&count=20").size() == 1u);
}

BOOST_AUTO_TEST_CASE(brave_is_auto_picked_from_the_key) {
  cfg.env_file["BRAVE_API_KEY"] = "k-from-env-file";
  BOOST_TEST(hits(R"({"query":"dogs"})").size() == 5u);
  auto log = logged("/brave");
  BOOST_REQUIRE(log.size() == 1u);
  BOOST_TEST(log[0]["headers"].get_string("X-Subscription-Token")
             == "k-from-env-file");
  // The process environment wins over .env.
  ::setenv("BRAVE_API_KEY", "k-from-process", 1);
  hits(R"({"query":"dogs"})");
  ::unsetenv("BRAVE_API_KEY");
  log = logged("/brave");
  BOOST_REQUIRE(log.size() == 2u);
  BOOST_TEST(log[1]["headers"].get_string("X-Subscription-Token")
             == "k-from-process");
}

BOOST_AUTO_TEST_CASE(tavily_posts_the_key) {
  cfg.env_file["TAVILY_API_KEY"] = "tvly-test";
  auto web = hits(R"({"query":"birds","limit":2})");
  BOOST_REQUIRE(web.size() == 2u);
  BOOST_TEST(web[1].get_string("title") == "Tavily 2: birds");
  BOOST_TEST(web[1].get_string("description") == "Tavily snippet 2");
  auto log = logged("/tavily");
  BOOST_REQUIRE(log.size() == 1u);
  BOOST_TEST(log[0].get_string("method") == "POST");
  auto body = json::parse(log[0].get_string("body"));
  BOOST_REQUIRE(body);
  BOOST_TEST(body.v->get_string("api_key") == "tvly-test");
  BOOST_TEST(body.v->get_string("query") == "birds");
  BOOST_TEST(body.v->get_int("max_results", 0) == 2);
}

BOOST_AUTO_TEST_CASE(nothing_configured_says_how_to_configure) {
  auto r = run(R"({"query":"anything"})");
  BOOST_TEST(r.get_bool("success", true) == false);
  auto err = r.get_string("error");
  BOOST_TEST(contains(err, "No web search provider configured"), err);
  BOOST_TEST(contains(err, "web.search_backend"));
  BOOST_TEST(contains(err, "config.yaml"));
  BOOST_TEST(contains(err, "BRAVE_API_KEY"));
  BOOST_TEST(server.requests() == "[]");
}

BOOST_AUTO_TEST_CASE(misconfigured_backends_are_explained) {
  cfg.web.search_backend = "searxng";
  auto r = run(R"({"query":"q"})");
  BOOST_TEST(contains(r.get_string("error"), "web.searxng_url is empty"));
  cfg.web.search_backend = "brave";
  r = run(R"({"query":"q"})");
  BOOST_TEST(contains(r.get_string("error"), "BRAVE_API_KEY is not set"));
  cfg.web.search_backend = "tavily";
  r = run(R"({"query":"q"})");
  BOOST_TEST(contains(r.get_string("error"), "TAVILY_API_KEY is not set"));
  cfg.web.search_backend = "google";
  r = run(R"({"query":"q"})");
  BOOST_TEST(contains(r.get_string("error"), "Unknown web.search_backend"));
}

BOOST_AUTO_TEST_CASE(backend_http_errors) {
  cfg.web.searxng_url = server.url("/searxng");
  server.script(R"({"path":"/searxng/search","status":500,)"
                R"("headers":{"Content-Type":"text/plain"},"body":"boom"})");
  auto r = run(R"({"query":"q"})");
  BOOST_TEST(r.get_string("error")
             == "Error searching web: SearXNG returned HTTP 500: boom");
  BOOST_TEST(r.find("success") == nullptr);
  cfg.web.searxng_url = "";
  cfg.env_file["BRAVE_API_KEY"] = "bad";
  server.script(R"({"path":"/brave","status":401,)"
                R"("body":"{\"error\":\"invalid token\"}"})");
  r = run(R"({"query":"q"})");
  BOOST_TEST(contains(r.get_string("error"),
                      "Error searching web: Brave Search returned HTTP 401"));
  BOOST_TEST(contains(r.get_string("error"), "check the API key"));
}

BOOST_AUTO_TEST_CASE(an_answer_over_the_download_limit_names_the_key) {
  // web.max_download_bytes applies as configured (no hidden floor).
  cfg.web.search_backend = "searxng";
  cfg.web.searxng_url = server.url("/searxng");
  cfg.web.max_download_bytes = 1024;
  auto r = run(R"({"query":"q","limit":30})");
  BOOST_TEST(contains(r.get_string("error"), "web.max_download_bytes"), r.dump());
  BOOST_TEST(contains(r.get_string("error"), "1024 bytes"), r.dump());
  cfg.web.max_download_bytes = 1 << 20;
  BOOST_TEST(hits(R"({"query":"q","limit":30})").size() == 30u);
}

BOOST_AUTO_TEST_CASE(malformed_backend_responses) {
  cfg.web.search_backend = "brave";
  cfg.env_file["BRAVE_API_KEY"] = "k";
  cfg.web.brave_url = server.url("/malformed");
  auto r = run(R"({"query":"q"})");
  BOOST_TEST(contains(r.get_string("error"),
                      "Error searching web: Brave Search returned malformed "
                      "JSON"), r.dump());
  cfg.web.search_backend = "searxng";
  cfg.web.searxng_url = server.url("/s");
  server.script(R"({"path":"/s/search","body":"{\"results\":\"nope\"}"})");
  r = run(R"({"query":"q"})");
  BOOST_TEST(contains(r.get_string("error"), "unexpected JSON shape"));
  server.script(R"({"path":"/s/search","body":"[1,2]"})");
  r = run(R"({"query":"q"})");
  BOOST_TEST(contains(r.get_string("error"), "not an object"));
  server.script(R"({"path":"/s/search","body":"{\"answers\":[]}"})");
  r = run(R"({"query":"q"})");
  BOOST_TEST(contains(r.get_string("error"), "no results"));
  // Entries without a URL are skipped, not fatal.
  server.script(R"({"path":"/s/search","body":)"
                R"("{\"results\":[{\"title\":\"x\"},7,)"
                R"({\"url\":\"https://ok.example/\",\"title\":\"ok\"}]}"})");
  auto web = hits(R"({"query":"q"})");
  BOOST_REQUIRE(web.size() == 1u);
  BOOST_TEST(web[0].get_string("url") == "https://ok.example/");
  BOOST_TEST(web[0].get_int("position", 0) == 1);
  // No results is a success with an empty list.
  server.script(R"({"path":"/s/search","body":"{\"results\":[]}"})");
  BOOST_TEST(hits(R"({"query":"q"})").empty());
}

BOOST_AUTO_TEST_CASE(unreachable_backend) {
  cfg.web.searxng_url = "http://127.0.0.1:1";
  auto r = run(R"({"query":"q"})");
  BOOST_TEST(contains(r.get_string("error"),
                      "Error searching web: SearXNG request failed"),
             r.dump());
  cfg.web.fetch_timeout = 1;
  cfg.web.searxng_url = server.url("/sx");
  server.script(R"({"path":"/sx/search","delay_ms":4000,"body":"{}"})");
  auto start = clock_type::now();
  r = run(R"({"query":"q"})");
  BOOST_TEST(std::chrono::duration_cast<std::chrono::milliseconds>(
               clock_type::now() - start).count() < 3000);
  BOOST_TEST(contains(r.get_string("error"), "did not answer in time"),
             r.dump());
}

BOOST_AUTO_TEST_CASE(cancellation) {
  cfg.web.searxng_url = server.url("/sx");
  server.script(R"({"path":"/sx/search","delay_ms":8000,"body":"{}"})");
  // Cancelled while the server holds the request.
  std::thread canceller{[this] {
    test::wait_until([&] {
      return server.requests().find("/sx/search") != std::string::npos;
    });
    cancelled = true;
  }};
  auto start = clock_type::now();
  auto r = run(R"({"query":"q"})");
  canceller.join();
  BOOST_TEST(std::chrono::duration_cast<std::chrono::milliseconds>(
               clock_type::now() - start).count() < 2000);
  BOOST_TEST(contains(r.get_string("error"), "interrupted"), r.dump());
}

BOOST_AUTO_TEST_CASE(bad_arguments) {
  cfg.web.searxng_url = server.url("/searxng");
  for (auto args : {R"({})", R"({"query":""})", R"({"query":"   "})",
                    R"({"query":"q","limit":0})",
                    R"({"query":"q","limit":101})",
                    R"({"query":"q","limit":"many"})", R"({"query":["a"]})",
                    R"({"query":{"a":1}})", "not json", "[]"}) {
    auto r = run(args);
    BOOST_TEST(r.find("error") != nullptr, args);
    BOOST_TEST(r.find("data") == nullptr, args);
  }
  auto r = run(R"({"query":")" + std::string(3000, 'x') + R"("})");
  BOOST_TEST(contains(r.get_string("error"), "too long"));
  // Nothing above reached the backend.
  BOOST_TEST(server.requests() == "[]");
  // Surrounding whitespace is trimmed, odd characters are encoded.
  hits(R"({"query":"  a+b/c?d=e#f \u00e9  ","limit":1})");
  auto log = logged("/searxng/search");
  BOOST_REQUIRE(log.size() == 1u);
  BOOST_TEST(log[0].get_string("path")
             == "/searxng/search?q=a%2Bb%2Fc%3Fd%3De%23f%20%C3%A9&format=json");
}

BOOST_AUTO_TEST_CASE(url_encoding) {
  BOOST_TEST(url_encode("") == "");
  BOOST_TEST(url_encode("AZaz09-_.~") == "AZaz09-_.~");
  BOOST_TEST(url_encode(" &=+%") == "%20%26%3D%2B%25");
  BOOST_TEST(url_encode(std::string{"\0\xff", 2}) == "%00%FF");
}

BOOST_AUTO_TEST_SUITE_END()
