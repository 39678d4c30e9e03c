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

#include "tests/support/browser_check.hpp"
#include "tests/support/serve_fixture.hpp"

using namespace mibyan;
using namespace mibyan::test::serving;

namespace {

using test::chromium_presence;
BOOST_TEST_GLOBAL_FIXTURE(chromium_presence);

std::string mcp_entry(const std::string& package) {
  return test::test_source_dir() + "/node/node_modules/@modelcontextprotocol/"
         + package + "/dist/index.js";
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(dashboard_browser, fixture)

BOOST_AUTO_TEST_CASE(every_page_in_headless_chromium) {
  auto node_dir = test::browser_node_dir();
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
  o.env["CHROMIUM"] = test::chromium_path();
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
                        << test::log_tail(sp->err_path));

  auto rep = test::browser_report(report_path);
  BOOST_CHECK(rep.get_bool("ok", false));
  auto steps = test::checked_steps(rep);
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
