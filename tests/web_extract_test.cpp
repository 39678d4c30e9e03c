#define BOOST_TEST_MODULE web_extract
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include <sys/stat.h>

#include "config/options.hpp"
#include "base/http_client.hpp"
#include "base/json.hpp"
#include "tools/core_tools.hpp"
#include "tools/registry.hpp"
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

long elapsed_ms(clock_type::time_point start) {
  return static_cast<long>(
    std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now()
                                                          - start)
      .count());
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
    cfg.home = home.path();
    cfg.security.allow_private_urls = true;  // the server is on 127.0.0.1
    reg.add(make_web_extract_tool());
    ctx.cwd = home.path();
    ctx.home = home.path();
    ctx.cfg = &cfg;
    ctx.http = &client;
    ctx.cancelled = &cancelled;
    ctx.deadline = clock_type::now() + 60s;
  }

  json::value run(const std::string& args) {
    return dispatch_tool(reg, "web_extract", std::string_view{args}, ctx);
  }

  // Runs with one URL and returns results[0].
  json::value one(const std::string& url, const std::string& extra = {}) {
    auto r = run(R"({"urls":[)" + json::quote(url) + "]" + extra + "}");
    auto* results = r.find("results");
    BOOST_REQUIRE_MESSAGE(results != nullptr && results->size() == 1,
                          r.dump());
    return results->as_array()[0];
  }

  std::string error_of(const std::string& url) {
    auto item = one(url);
    auto* err = item.find("error");
    BOOST_REQUIRE(err != nullptr);
    return err->is_string() ? err->as_string() : std::string{"<null>"};
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(web_extract_suite, fixture)

BOOST_AUTO_TEST_CASE(tool_metadata) {
  auto t = reg.find("web_extract");
  BOOST_REQUIRE(t != nullptr);
  BOOST_TEST(std::string{t->toolset()} == "web");
  BOOST_TEST(t->parallel_safe());
  auto limit = t->deadline(json::value::make_object(), cfg);
  BOOST_TEST(limit.count() > cfg.web.fetch_timeout * 1000);
  auto schema = t->schema();
  BOOST_TEST(schema["properties"]["urls"]["type"].as_string() == "array");
}

BOOST_AUTO_TEST_CASE(html_page_becomes_text_with_title) {
  auto r = run(R"({"urls":[)" + json::quote(server.url("/page")) + "]}");
  BOOST_TEST(r.find("error") == nullptr, r.dump());
  auto& item = r["results"].as_array().at(0);
  BOOST_TEST(item.get_string("url") == server.url("/page"));
  BOOST_TEST(item.get_string("title") == "Test & Page");
  BOOST_TEST(item["error"].is_null());
  auto content = item.get_string("content");
  BOOST_TEST(contains(content, "# Main Heading"), content);
  BOOST_TEST(contains(content, "## Sub heading"));
  BOOST_TEST(contains(content, "[relative link](" + server.url("/other")
                                 + "?x=1&y=2)"));
  BOOST_TEST(contains(content, "\"entities\" \xC3\xA9\xC3\xA9"));
  BOOST_TEST(contains(content, "- item one\n- item two"));
  BOOST_TEST(contains(content, "Name | Value\na | 1"));
  BOOST_TEST(contains(content, "```\ncode line 1\n  indented line 2\n```"));
  BOOST_TEST(contains(content, "[IMAGE: inline chart]"));
  for (auto noise : {"SCRIPT-CONTENT", "NAV-LINK", "FOOTER-TEXT", "color:",
                     "base64"})
    BOOST_TEST(!contains(content, noise), noise);
}

BOOST_AUTO_TEST_CASE(text_and_json_pass_through) {
  auto item = one(server.url("/text"));
  BOOST_TEST(item.get_string("content") == "plain text body\nsecond line");
  BOOST_TEST(item.get_string("title") == "");
  BOOST_TEST(item["error"].is_null());
  item = one(server.url("/json"));
  BOOST_TEST(item.get_string("content") == R"({"hello": "world", "n": 42})");
  item = one(server.url("/gzip"));
  BOOST_TEST(item.get_string("title") == "Zipped");
  BOOST_TEST(contains(item.get_string("content"), "GZIP-CONTENT"));
}

BOOST_AUTO_TEST_CASE(latin1_pages_are_converted) {
  // "caf\xE9" in ISO-8859-1.
  server.script(R"({"path":"/latin1","status":200,"headers":)"
                R"({"Content-Type":"text/plain; charset=ISO-8859-1"},)"
                R"("body_b64":"Y2Fm6Q=="})");
  auto item = one(server.url("/latin1"));
  BOOST_TEST(item.get_string("content") == "caf\xC3\xA9");
  // Invalid UTF-8 in a page declared UTF-8 is repaired, not passed on.
  server.script(R"({"path":"/bad-utf8","status":200,)"
                R"("headers":{"Content-Type":"text/plain; charset=utf-8"},)"
                R"("body_b64":"b2sg/yBvaw=="})");
  item = one(server.url("/bad-utf8"));
  BOOST_TEST(item.get_string("content") == "ok \xEF\xBF\xBD ok");
}

BOOST_AUTO_TEST_CASE(urls_are_fetched_concurrently) {
  std::string args = R"({"urls":[)";
  for (int i = 0; i < 5; ++i)
    args += (i ? "," : "") + json::quote(server.url("/slow?ms=600&i=")
                                         + std::to_string(i));
  args += "]}";
  auto start = clock_type::now();
  auto r = run(args);
  auto ms = elapsed_ms(start);
  BOOST_TEST(r.find("error") == nullptr, r.dump());
  BOOST_TEST(r["results"].size() == 5u);
  for (auto& item : r["results"].as_array())
    BOOST_TEST(item.get_string("content") == "slow done");
  BOOST_TEST(ms < 5 * 600 / 2, ms);
}

BOOST_AUTO_TEST_CASE(long_pages_get_head_tail_and_spill_file) {
  auto url = server.url("/long?chars=100000");
  auto item = one(url, R"(,"char_limit":5000)");
  BOOST_TEST(item["error"].is_null());
  auto content = item.get_string("content");
  BOOST_TEST(content.size() <= 5000u);
  BOOST_TEST(content.size() > 4000u);
  BOOST_TEST(contains(content, "HEAD-MARKER"));
  BOOST_TEST(contains(content, "TAIL-MARKER"));
  BOOST_TEST(contains(content, "characters omitted"));
  auto pos = content.find("Full text saved to ");
  BOOST_REQUIRE(pos != std::string::npos);
  auto path = content.substr(pos + 19);
  path = path.substr(0, path.find(';'));
  BOOST_TEST(path.rfind(home.path() + "/cache/web/", 0) == 0u, path);
  BOOST_TEST(path.size() > 4u);
  BOOST_TEST(path.substr(path.size() - 4) == ".txt");
  auto full = test::slurp(path);
  BOOST_TEST(full.size() > 90000u);
  BOOST_TEST(contains(full, "HEAD-MARKER"));
  BOOST_TEST(contains(full, "TAIL-MARKER"));
  struct stat st {};
  BOOST_REQUIRE(::stat(path.c_str(), &st) == 0);
  BOOST_TEST((st.st_mode & 0777) == 0600u);
  // The default limit comes from the configuration.
  item = one(server.url("/long?chars=40000"));
  BOOST_TEST(item.get_string("content").size() <= 15000u);
  BOOST_TEST(contains(item.get_string("content"), "Full text saved to"));
  cfg.web.extract_char_limit = 100000;
  item = one(server.url("/long?chars=40000"));
  BOOST_TEST(!contains(item.get_string("content"), "Full text saved to"));
  BOOST_TEST(contains(item.get_string("content"), "TAIL-MARKER"));
  // Above the maximum is clamped, not refused.
  item = one(server.url("/text"), R"(,"char_limit":100000000)");
  BOOST_TEST(item["error"].is_null());
}

BOOST_AUTO_TEST_CASE(spill_failure_is_reported_in_the_footer) {
  ctx.home = home.path() + "/file";
  home.write("file", "not a directory");
  auto item = one(server.url("/long?chars=30000"), R"(,"char_limit":2000)");
  auto content = item.get_string("content");
  BOOST_TEST(content.size() <= 2000u);
  BOOST_TEST(contains(content, "could not be saved"), content);
}

BOOST_AUTO_TEST_CASE(redirects) {
  auto item = one(server.url("/redirect?to=/page"));
  BOOST_TEST(item["error"].is_null());
  BOOST_TEST(item.get_string("title") == "Test & Page");
  cfg.web.max_redirects = 2;
  auto err = error_of(server.url("/redirect-chain/4"));
  BOOST_TEST(contains(err, "Could not fetch the page"), err);
  cfg.web.max_redirects = 0;
  err = error_of(server.url("/redirect?to=/page"));
  BOOST_TEST(contains(err, "HTTP 302"), err);
}

BOOST_AUTO_TEST_CASE(http_errors_are_per_url) {
  BOOST_TEST(error_of(server.url("/status/404"))
             == "HTTP 404 Not Found fetching the page");
  BOOST_TEST(error_of(server.url("/status/500"))
             == "HTTP 500 Internal Server Error fetching the page");
  BOOST_TEST(error_of(server.url("/status/418"))
             == "HTTP 418 fetching the page");
  // All failed: top-level error too.
  auto r = run(R"({"urls":[)" + json::quote(server.url("/status/404")) + ","
               + json::quote(server.url("/status/500")) + "]}");
  BOOST_TEST(r.get_string("error") == "Content was inaccessible or not found");
  BOOST_TEST(r["results"].size() == 2u);
  // One success is enough for no top-level error.
  r = run(R"({"urls":[)" + json::quote(server.url("/status/404")) + ","
          + json::quote(server.url("/text")) + "]}");
  BOOST_TEST(r.find("error") == nullptr, r.dump());
  BOOST_TEST(!r["results"].as_array()[0]["error"].is_null());
  BOOST_TEST(r["results"].as_array()[1]["error"].is_null());
}

BOOST_AUTO_TEST_CASE(binary_content_is_refused) {
  auto err = error_of(server.url("/png"));
  BOOST_TEST(contains(err, "'image/png'"), err);
  err = error_of(server.url("/bytes?type=application/pdf"));
  BOOST_TEST(contains(err, "'application/pdf'"), err);
  err = error_of(server.url("/bytes?type=application/octet-stream"));
  BOOST_TEST(contains(err, "'application/octet-stream'"), err);
  // Binary bytes declared as text are refused too.
  err = error_of(server.url("/bytes?type=text/plain"));
  BOOST_TEST(contains(err, "Unsupported content type"), err);
}

BOOST_AUTO_TEST_CASE(empty_pages_are_an_error) {
  server.script(R"({"path":"/empty","headers":{"Content-Type":"text/html"},)"
                R"("body":"<html><head><title>Empty</title></head><body>)"
                R"(<script>x()</script></body></html>"})");
  auto err = error_of(server.url("/empty"));
  BOOST_TEST(err == "The page has no readable text content");
}

BOOST_AUTO_TEST_CASE(slow_server_hits_the_timeout) {
  cfg.web.fetch_timeout = 1;
  auto start = clock_type::now();
  auto err = error_of(server.url("/slow?ms=5000"));
  BOOST_TEST(contains(err, "Timed out after 1 s"), err);
  BOOST_TEST(elapsed_ms(start) < 3000);
}

BOOST_AUTO_TEST_CASE(download_size_is_capped) {
  cfg.web.max_download_bytes = 100000;
  auto item = one(server.url("/huge?bytes=50000000"), R"(,"char_limit":2000)");
  BOOST_TEST(item["error"].is_null());
  auto content = item.get_string("content");
  BOOST_TEST(content.size() <= 2000u);
  BOOST_TEST(contains(content, "Download stopped at 100000 bytes"), content);
  BOOST_TEST(contains(content, "Full text saved to"));
}

BOOST_AUTO_TEST_CASE(cancellation_returns_promptly) {
  // Cancelled while the server holds the request.
  std::thread canceller{[this] {
    test::wait_until([&] {
      return server.requests().find("/slow") != std::string::npos;
    });
    cancelled = true;
  }};
  auto start = clock_type::now();
  auto r = run(R"({"urls":[)" + json::quote(server.url("/slow?ms=8000"))
               + "]}");
  canceller.join();
  BOOST_TEST(elapsed_ms(start) < 2000);
  BOOST_TEST(r.get_string("error") == "web_extract was interrupted");
  BOOST_TEST(contains(r["results"].as_array()[0].get_string("error"),
                      "Cancelled"));
}

BOOST_AUTO_TEST_CASE(tool_deadline_is_honoured) {
  ctx.deadline = clock_type::now() + 300ms;
  auto start = clock_type::now();
  auto err = error_of(server.url("/slow?ms=8000"));
  BOOST_TEST(elapsed_ms(start) < 2000);
  BOOST_TEST(contains(err, "Cancelled"), err);
}

BOOST_AUTO_TEST_CASE(works_without_a_shared_client) {
  ctx.http = nullptr;
  auto item = one(server.url("/text"));
  BOOST_TEST(item["error"].is_null());
  BOOST_TEST(contains(item.get_string("content"), "plain text body"));
}

// -- SSRF guard ---------------------------------------------------------------

BOOST_AUTO_TEST_CASE(default_guard_blocks_internal_targets) {
  cfg.security.allow_private_urls = false;
  auto blocked = "Blocked: URL targets a private or internal network address";
  auto port = std::to_string(server.port());
  for (auto url : {server.url("/page"), "http://localhost:" + port + "/page",
                   "http://[::1]:" + port + "/page",
                   std::string{"http://169.254.169.254/latest/meta-data/"},
                   std::string{"http://metadata.google.internal/"},
                   std::string{"http://10.0.0.1/"},
                   "http://2130706433:" + port + "/page"}) {
    auto item = one(url);
    BOOST_TEST(item.get_string("error") == blocked, url);
    BOOST_TEST(item.get_bool("blocked_by_policy", false), url);
    BOOST_TEST(item.get_string("content") == "");
  }
  auto r = run(R"({"urls":[)" + json::quote(server.url("/page")) + "]}");
  BOOST_TEST(r.get_string("error") == "Content was inaccessible or not found");
  BOOST_TEST(server.requests() == "[]");
}

BOOST_AUTO_TEST_CASE(redirect_from_allowed_to_private_host_is_blocked) {
  // 127.0.0.1 plays a public host; 127.0.0.2 stays private.
  cfg.security.allow_private_urls = false;
  cfg.security.allowed_private_addresses = {"127.0.0.1"};
  auto port = std::to_string(server.port());
  auto item = one(server.url("/page"));
  BOOST_TEST(item["error"].is_null(), item.dump());
  BOOST_TEST(item.get_string("title") == "Test & Page");
  auto blocked = "Blocked: URL targets a private or internal network address";
  // Straight to the private address.
  BOOST_TEST(error_of("http://127.0.0.2:" + port + "/page") == blocked);
  // Via a redirect from the allowed host: caught at connect time.
  item = one(server.url("/redirect?to=http://127.0.0.2:" + port + "/page"));
  BOOST_TEST(item.get_string("error") == blocked, item.dump());
  BOOST_TEST(item.get_bool("blocked_by_policy", false));
  // A redirect to an internal host name is caught as well.
  item = one(server.url("/redirect?to=http://localhost:" + port + "/page"));
  BOOST_TEST(item.get_string("error") == blocked, item.dump());
  // The allowed host saw only the redirect requests.
  auto log = server.requests();
  BOOST_TEST(!contains(log, "\"path\": \"/page\", \"headers\": {\"Host\": "
                            "\"127.0.0.2"));
}

// -- bad arguments ------------------------------------------------------------

BOOST_AUTO_TEST_CASE(bad_urls_get_per_url_errors) {
  auto r = run(R"({"urls":["ftp://example.com/file","not a url","",)"
               R"("http://user:pw@example.com/",)"
               R"("https://example.com/?api_key=0123456789abcdef0123"]})");
  BOOST_TEST(r.get_string("error") == "Content was inaccessible or not found");
  auto& items = r["results"].as_array();
  BOOST_REQUIRE(items.size() == 5u);
  BOOST_TEST(contains(items[0].get_string("error"), "scheme 'ftp'"));
  BOOST_TEST(contains(items[1].get_string("error"), "spaces"));
  BOOST_TEST(contains(items[2].get_string("error"), "empty"));
  BOOST_TEST(contains(items[3].get_string("error"), "credentials"));
  BOOST_TEST(contains(items[4].get_string("error"), "API key"));
  BOOST_TEST(items[0].get_string("url") == "ftp://example.com/file");
}

BOOST_AUTO_TEST_CASE(bad_argument_shapes) {
  auto has_error = [](const json::value& r) {
    return r.find("error") != nullptr && r.find("results") == nullptr;
  };
  // Empty list, too many URLs, missing urls.
  BOOST_TEST(has_error(run(R"({"urls":[]})")));
  auto six = run(R"({"urls":["http://a.example/","http://b.example/",)"
                 R"("http://c.example/","http://d.example/",)"
                 R"("http://e.example/","http://f.example/"]})");
  BOOST_TEST(has_error(six));
  BOOST_TEST(contains(six.get_string("error"), "at most 5"));
  BOOST_TEST(has_error(run(R"({})")));
  BOOST_TEST(has_error(run(R"({"urls":[1,2]})")));
  BOOST_TEST(has_error(run(R"({"urls":{"a":1}})")));
  BOOST_TEST(has_error(run(R"({"urls":[")" + server.url("/text")
                           + R"("],"char_limit":100})")));
  BOOST_TEST(has_error(run(R"({"urls":[")" + server.url("/text")
                           + R"("],"char_limit":"lots"})")));
  BOOST_TEST(has_error(run("not json")));
  BOOST_TEST(has_error(run("[1,2]")));
  // A bare string is coerced into a one-element list.
  auto r = run(R"({"urls":")" + server.url("/text") + R"("})");
  BOOST_TEST(r.find("error") == nullptr, r.dump());
  // A huge URL is refused without echoing all of it back.
  r = run(R"({"urls":["http://example.com/)" + std::string(100000, 'a')
          + R"("]})");
  auto& item = r["results"].as_array().at(0);
  BOOST_TEST(contains(item.get_string("error"), "8192"));
  BOOST_TEST(item.get_string("url").size() < 300u);
}

BOOST_AUTO_TEST_SUITE_END()
