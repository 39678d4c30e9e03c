#define BOOST_TEST_MODULE jobs_browser
#include "tests/support/paths.hpp"
#include <boost/test/unit_test.hpp>

// The dashboard's Jobs page in a real browser (docs/cron.md, "On the
// dashboard"): a real `mibyan serve` with a key and the scripted provider,
// two jobs made with `mibyan cron add` beforehand, driven by headless
// Chromium through puppeteer-core in tests/node/jobs_browser.mjs: the page
// opens from the navigation, lists the jobs with schedule and next run,
// pauses and resumes one, runs one now and shows its run, its delivered
// answer (as text) and the link to its transcript, deletes one after the
// confirmation, and shows an unknown job's error; no CSP violation, no
// script error. Without Chromium: exit 77 (skipped), or a failure with
// MIBYAN_REQUIRE_TEST_DATA=1, as tests/dashboard_browser_test.cpp.

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

std::string add_job(const std::string& home, std::vector<std::string> args) {
  args.insert(args.begin(), {"cron", "add"});
  args.push_back("--json");
  test::process_options o;
  o.env["MIBYAN_HOME"] = home;
  o.timeout_seconds = 60;
  auto r = test::run_mibyan(args, o);
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  auto v = json::parse(r.out);
  BOOST_REQUIRE(v);
  return v.v->get_string("id");
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(jobs_browser, fixture)

BOOST_AUTO_TEST_CASE(jobs_page_in_headless_chromium) {
  auto node_dir = test::browser_node_dir();
  key = "jobs-browser-test-key-41c9";
  auto config = "model:\n  provider: custom\n  default: m\n  base_url: "
                + provider.url("/v1") + "\n";
  home.write("config.yaml", config);
  auto job = add_job(home.path(), {"--name", "daily digest", "--schedule",
                                   "every 1d", "--prompt",
                                   "Write the digest.", "--deliver",
                                   "dashboard"});
  auto other = add_job(home.path(), {"--name", "weekly cleanup",
                                     "--schedule", "0 3 * * 0", "--prompt",
                                     "Clean up."});
  auto sp = start(config);

  auto report_path = home / "jobs-report.json";
  test::process_options o;
  o.env["SERVE_URL"] = "http://127.0.0.1:" + std::to_string(sp->port);
  o.env["SERVE_KEY"] = key;
  o.env["PROVIDER_URL"] = provider.url("");
  o.env["JOB_ID"] = job;
  o.env["OTHER_ID"] = other;
  o.env["CHROMIUM"] = test::chromium_path();
  o.env["REPORT_PATH"] = report_path;
  if (const char* shots = std::getenv("MIBYAN_DASHBOARD_SCREENSHOTS"))
    o.env["SCREENSHOT_DIR"] = shots;
  o.cwd = node_dir;
  o.timeout_seconds = 240;
  auto r = test::run_process({"node", node_dir + "/jobs_browser.mjs"}, o);
  BOOST_TEST_MESSAGE("jobs_browser.mjs:\n" << r.out << r.err);
  BOOST_CHECK_MESSAGE(r.exit_code == 0 && contains(r.out, "OK jobs"),
                      "jobs_browser.mjs failed (" << r.exit_code << "):\n"
                        << r.out << r.err << "\nserve stderr (tail):\n"
                        << test::log_tail(sp->err_path));
  auto rep = test::browser_report(report_path);
  auto steps = test::checked_steps(rep);
  for (auto want : {"log in and open the Jobs page from the navigation",
                    "the list shows each job's schedule, next run and state",
                    "pause and resume a job from the list",
                    "run a job now: its run, answer and transcript appear",
                    "delete a job after confirming",
                    "no script error, no CSP violation, no injected script"})
    BOOST_CHECK_MESSAGE(steps.count(want) == 1, "step not run: " << want);
  BOOST_CHECK_EQUAL(sp->stop(), 0);
}

BOOST_AUTO_TEST_SUITE_END()
