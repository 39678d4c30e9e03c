#define BOOST_TEST_MODULE dashboard_browser
#include "tests/support/paths.hpp"
#include <boost/test/unit_test.hpp>

// The dashboard in a real browser (docs/dashboard.md): a real `mibyan
// serve` with a key, `approvals.http` and `clarify.http: pending`, two MCP
// servers (one that cannot start) and the scripted provider behind it,
// driven by headless Chromium (Debian's `chromium`) through puppeteer-core
// in tests/node/dashboard_browser.mjs. The script opens every page,
// searches, reads an execute_code transcript, watches a live turn,
// interrupts one, approves one command, denies another and answers a
// question, checks that markup in a transcript stays text and that a
// request without the CSRF token is refused, and writes a JSON report this
// test reads.
//
// Without Chromium the suite prints SKIPPED and exits 77 (ctest: skipped),
// or fails with MIBYAN_REQUIRE_TEST_DATA=1 (as .ci/run sets).
// MIBYAN_TEST_CHROMIUM overrides the browser's path; with
// MIBYAN_DASHBOARD_SCREENSHOTS=DIR the script saves one PNG per page there
// (scripts/dashboard-screenshots.sh, for docs/images/); with
// MIBYAN_DASHBOARD_FAILURES=DIR it saves the page of each failed step.

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <unistd.h>

#include "tests/support/serve_fixture.hpp"

using namespace mibyan;
using namespace mibyan::test::serving;

namespace {

std::string chromium_path() {
  const char* env = std::getenv("MIBYAN_TEST_CHROMIUM");
  return env != nullptr && *env != '\0' ? env : "/usr/bin/chromium";
}

// Runs before any test case: no browser, no suite (exit 77, reported as
// skipped, never as passed).
struct chromium_presence {
  chromium_presence() {
    auto path = chromium_path();
    if (::access(path.c_str(), X_OK) == 0)
      return;
    // CI always installs the browser: there a missing one is a failure.
    if (const char* req = std::getenv("MIBYAN_REQUIRE_TEST_DATA");
        req != nullptr && std::string{req} == "1") {
      std::fprintf(stderr,
                   "FAILED: no Chromium at %s and MIBYAN_REQUIRE_TEST_DATA=1 "
                   "(scripts/install-test-deps.sh installs it)\n",
                   path.c_str());
      std::fflush(stderr);
      std::_Exit(1);
    }
    std::fprintf(stderr,
                 "SKIPPED: no Chromium at %s (install Debian's `chromium` "
                 "package with scripts/install-test-deps.sh, or set "
                 "MIBYAN_TEST_CHROMIUM)\n",
                 path.c_str());
    std::fflush(stderr);
    std::_Exit(77);
  }
};
BOOST_TEST_GLOBAL_FIXTURE(chromium_presence);

std::string mcp_entry(const std::string& package) {
  return test::test_source_dir() + "/node/node_modules/@modelcontextprotocol/"
         + package + "/dist/index.js";
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(dashboard_browser, fixture)

BOOST_AUTO_TEST_CASE(every_page_in_headless_chromium) {
  auto node_dir = test::test_source_dir() + "/node";
  BOOST_REQUIRE_MESSAGE(
    std::filesystem::exists(node_dir + "/node_modules/puppeteer-core/package.json"),
    "puppeteer-core is not installed in tests/node/node_modules: run "
    "scripts/install-test-deps.sh (needs npm registry access)");
  BOOST_REQUIRE_MESSAGE(std::filesystem::exists(mcp_entry("server-filesystem")),
                        "@modelcontextprotocol/server-filesystem is not "
                        "installed: run scripts/install-test-deps.sh");

  key = "dashboard-browser-test-key-7f3a";
  auto work = home / "work";
  std::filesystem::create_directories(work);
  auto sp = start("approvals:\n"
                  "  http: pending\n"
                  "  timeout: 120\n"
                  "clarify:\n"
                  "  http: pending\n"
                  "  timeout: 120\n"
                  "mcp_servers:\n"
                  "  files:\n"
                  "    command: node\n"
                  "    args: [\"" + mcp_entry("server-filesystem") + "\", \""
                    + work + "\"]\n"
                  "    connect_timeout: 60\n"
                  "  broken:\n"
                  "    command: " + (home / "no-such-mcp-server") + "\n");

  auto report_path = home / "dashboard-report.json";
  test::process_options o;
  o.env["SERVE_URL"] = "http://127.0.0.1:" + std::to_string(sp->port);
  o.env["SERVE_KEY"] = key;
  o.env["PROVIDER_URL"] = provider.url("");
  o.env["WORK_DIR"] = work;
  o.env["CHROMIUM"] = chromium_path();
  o.env["REPORT_PATH"] = report_path;
  if (const char* shots = std::getenv("MIBYAN_DASHBOARD_SCREENSHOTS"))
    o.env["SCREENSHOT_DIR"] = shots;
  if (const char* failures = std::getenv("MIBYAN_DASHBOARD_FAILURES"))
    o.env["FAILURE_DIR"] = failures;
  o.cwd = node_dir;
  o.timeout_seconds = 540;
  auto r = test::run_process({"node", node_dir + "/dashboard_browser.mjs"}, o);
  BOOST_TEST_MESSAGE("dashboard_browser.mjs:\n" << r.out << r.err);

  BOOST_CHECK_MESSAGE(r.exit_code == 0 && contains(r.out, "OK dashboard"),
                      "dashboard_browser.mjs failed (" << r.exit_code << "):\n"
                        << r.out << r.err << "\nserve stderr (tail):\n"
                        << [&] {
                             auto e = test::slurp(sp->err_path);
                             return e.size() > 6000 ? e.substr(e.size() - 6000) : e;
                           }());

  auto parsed = json::parse(test::slurp(report_path));
  BOOST_REQUIRE_MESSAGE(parsed && parsed.v->is_object(),
                        "no JSON report at " << report_path);
  const auto& rep = *parsed.v;
  BOOST_CHECK(rep.get_bool("ok", false));
  std::set<std::string> steps;
  auto* step_list = rep.find("steps");
  BOOST_REQUIRE(step_list && step_list->is_array());
  for (const auto& s : step_list->as_array()) {
    steps.insert(s.get_string("name"));
    BOOST_CHECK_MESSAGE(s.get_bool("ok", false),
                        "step '" << s.get_string("name") << "' failed: "
                                 << s.get_string("error"));
  }
  // Each scenario of the issue ran (a step that is missing did not even start).
  for (auto want : {"login page, then the key logs in",
                    "search highlights the hits",
                    "transcript with an execute_code script, highlighted, and its tool calls",
                    "markup in a transcript renders as text and never runs",
                    "a state-changing request without the CSRF token is refused",
                    "live page streams a turn's deltas and tool events",
                    "approve a pending command and the turn goes on",
                    "deny another pending command and the turn goes on",
                    "answer a clarifying question and the turn goes on"})
    BOOST_CHECK_MESSAGE(steps.count(want) == 1, "step not run: " << want);
  std::set<std::string> pages;
  if (auto* page_list = rep.find("pages"); page_list && page_list->is_array())
    for (const auto& p : page_list->as_array())
      if (p.is_string())
        pages.insert(p.as_string());
  for (auto want : {"login", "sessions", "session", "live", "approvals",
                    "kernels", "cluster", "mcp", "config", "usage"})
    BOOST_CHECK_MESSAGE(pages.count(want) == 1, "page not opened: " << want);
  BOOST_CHECK_EQUAL(sp->stop(), 0);
}

BOOST_AUTO_TEST_SUITE_END()
