// The dashboard's scheduled-jobs endpoints (serve/ui_jobs.hpp, docs/cron.md
// "Using it") over real HTTP against a `mibyan serve` child with a key and
// the scripted provider, with jobs added by `mibyan cron add` beforehand:
// the list with schedules in words, one job, its runs page by page, pause,
// resume, run now (409 while its run is going), the answer delivered to
// the dashboard, delete; login by cookie needs the CSRF token for changes;
// bad ids are 400, unknown ones 404, bad parameters 400, wrong methods 405.
#define BOOST_TEST_MODULE ui_jobs
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <thread>

#include "tests/support/scripted_replies.hpp"
#include "tests/support/ui_client.hpp"

using namespace mibyan;
using namespace mibyan::test::ui;
using namespace std::chrono;

namespace {

const std::string the_key = "ui-jobs-secret-key-913";
const std::string auth = "Authorization: Bearer " + the_key + "\r\n";

struct jobs_fixture : fixture {
  std::unique_ptr<serve_process> sp;
  std::string daily, hourly;

  jobs_fixture() {
    key = the_key;
    home.write("config.yaml", config());
    daily = add({"--name", "daily <b>report</b>", "--schedule", "0 9 * * *",
                 "--tz", "America/New_York", "--prompt", "Write the report.",
                 "--deliver", "dashboard"});
    hourly = add({"--name", "hourly", "--schedule", "every 1h", "--prompt",
                  "Check."});
    sp = start(config());
  }

  std::string config() {
    return "model:\n  provider: custom\n  default: m\n  base_url: "
           + provider.url("/v1") + "\n";
  }

  std::string add(std::vector<std::string> args) {
    args.insert(args.begin(), {"cron", "add"});
    args.push_back("--json");
    test::process_options o;
    o.env["MIBYAN_HOME"] = home.path();
    o.timeout_seconds = 60;
    auto r = test::run_mibyan(args, o);
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    auto v = json::parse(r.out);
    BOOST_REQUIRE(v);
    return v.v->get_string("id");
  }

  std::string call(const std::string& method, const std::string& path,
                   const std::string& headers = auth) {
    return request(sp->port, method, path, {}, headers);
  }
  json::value ok(const std::string& method, const std::string& path) {
    auto r = call(method, path);
    BOOST_TEST_CONTEXT(method << " " << path << ": " << r) {
      BOOST_REQUIRE_EQUAL(status_of(r), 200);
    }
    return body_of(r);
  }

  // Waits (at most 60 s) until `ready` holds.
  template <class F>
  bool wait_until(F ready) {
    auto deadline = steady_clock::now() + seconds{60};
    while (steady_clock::now() < deadline) {
      if (ready())
        return true;
      std::this_thread::sleep_for(milliseconds{50});
    }
    return ready();
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(ui_jobs, jobs_fixture)

BOOST_AUTO_TEST_CASE(list_show_and_change_jobs) {
  auto list = ok("GET", "/ui/api/jobs");
  auto& data = list["data"];
  BOOST_REQUIRE(data.is_array());
  BOOST_REQUIRE_EQUAL(data.size(), 2u);
  bool saw_daily = false;
  for (auto& j : data.as_array()) {
    BOOST_CHECK(!j.get_string("schedule_description").empty());
    BOOST_CHECK(j.get_int("next_run_ms", 0) > 0);
    if (j.get_string("id") == daily) {
      saw_daily = true;
      // Text stays text: the name comes back byte for byte.
      BOOST_CHECK_EQUAL(j.get_string("name"), "daily <b>report</b>");
      BOOST_CHECK_EQUAL(j.get_string("timezone"), "America/New_York");
    }
  }
  BOOST_CHECK(saw_daily);
  BOOST_CHECK(list["scheduler"].get_bool("here", false));

  auto one = ok("GET", "/ui/api/jobs/" + hourly);
  BOOST_CHECK_EQUAL(one["job"].get_string("id"), hourly);
  BOOST_CHECK(one["delivered"].is_array());

  auto paused = ok("POST", "/ui/api/jobs/" + hourly + "/pause");
  BOOST_CHECK(paused["job"].get_bool("paused", false));
  BOOST_CHECK(ok("GET", "/ui/api/jobs/" + hourly)["job"].get_bool("paused",
                                                                  false));
  auto resumed = ok("POST", "/ui/api/jobs/" + hourly + "/resume");
  BOOST_CHECK(!resumed["job"].get_bool("paused", true));

  auto deleted = ok("DELETE", "/ui/api/jobs/" + hourly);
  BOOST_CHECK(deleted.get_bool("deleted", false));
  check_error(call("GET", "/ui/api/jobs/" + hourly), 404, "job_not_found");
  check_error(call("DELETE", "/ui/api/jobs/" + hourly), 404, "job_not_found");
  BOOST_CHECK_EQUAL(ok("GET", "/ui/api/jobs")["data"].size(), 1u);
}

BOOST_AUTO_TEST_CASE(run_now_records_the_run_and_delivers_to_the_dashboard) {
  // The run's answer comes after 3 s: a second "run now" meanwhile is 409.
  script(test::completion("DASHBOARD-ANSWER-7"), 3000);
  auto queued = ok("POST", "/ui/api/jobs/" + daily + "/run");
  BOOST_CHECK(queued.get_bool("queued", false));
  BOOST_REQUIRE(wait_until([&] {
    auto runs = ok("GET", "/ui/api/jobs/" + daily + "/runs")["data"];
    return runs.size() == 1
           && runs.as_array()[0].get_string("status") == "running";
  }));
  check_error(call("POST", "/ui/api/jobs/" + daily + "/run"), 409,
              "job_busy");
  json::value run;
  BOOST_REQUIRE_MESSAGE(wait_until([&] {
    auto runs = ok("GET", "/ui/api/jobs/" + daily + "/runs")["data"];
    if (runs.size() != 1 || runs.as_array()[0].get_int("ended_ms", 0) == 0)
      return false;
    run = runs.as_array()[0];
    return true;
  }),
                        "the run did not end; serve stderr:\n"
                          << test::slurp(sp->err_path));
  BOOST_CHECK_EQUAL(run.get_string("status"), "ok");
  BOOST_CHECK_EQUAL(run.get_string("trigger"), "manual");
  auto session = run.get_string("session_id");
  BOOST_REQUIRE(!session.empty());
  // The run's session is a transcript the dashboard can open.
  auto transcript = call("GET", "/ui/api/sessions/" + session);
  BOOST_CHECK_EQUAL(status_of(transcript), 200);
  BOOST_CHECK(contains(transcript, "DASHBOARD-ANSWER-7"));
  // Delivered to the dashboard.
  auto one = ok("GET", "/ui/api/jobs/" + daily);
  auto& delivered = one["delivered"];
  BOOST_REQUIRE_EQUAL(delivered.size(), 1u);
  BOOST_CHECK(contains(delivered.as_array()[0].get_string("result"),
                       "DASHBOARD-ANSWER-7"));
  BOOST_CHECK_EQUAL(one["job"].get_string("last_status"), "ok");

  // Paging: limit 1 of one run has no next page; offset past the end is
  // empty.
  auto page = ok("GET", "/ui/api/jobs/" + daily + "/runs?limit=1");
  BOOST_CHECK_EQUAL(page["data"].size(), 1u);
  BOOST_CHECK(page.find("next_offset")->is_null());
  BOOST_CHECK_EQUAL(
    ok("GET", "/ui/api/jobs/" + daily + "/runs?limit=5&offset=5")["data"]
      .size(),
    0u);
}

BOOST_AUTO_TEST_CASE(bad_requests_get_clear_errors) {
  // Unknown ids.
  auto none = std::string{"job_0000000000000000"};
  check_error(call("GET", "/ui/api/jobs/" + none), 404, "job_not_found");
  check_error(call("GET", "/ui/api/jobs/" + none + "/runs"), 404,
              "job_not_found");
  for (auto verb : {"run", "pause", "resume"})
    check_error(call("POST", "/ui/api/jobs/" + none + "/" + verb), 404,
                "job_not_found");
  check_error(call("DELETE", "/ui/api/jobs/" + none), 404, "job_not_found");
  // Malformed ids.
  for (std::string bad : std::vector<std::string>{
         "a.b", "%2e%2e", "x%00y", "with%20space", std::string(65, 'a')})
    check_error(call("GET", "/ui/api/jobs/" + bad), 400, "bad_job_id");
  check_error(call("POST", "/ui/api/jobs/bad.id/run"), 400, "bad_job_id");
  // Bad parameters.
  for (auto q : {"limit=0", "limit=201", "limit=abc", "offset=-1",
                 "offset=x", "limit=99999999999999999999"})
    check_error(call("GET", "/ui/api/jobs/" + daily + "/runs?" + q), 400,
                "bad_parameter");
  // Unknown paths and wrong methods.
  check_error(call("GET", "/ui/api/jobs/" + daily + "/bogus"), 404,
              "not_found");
  check_error(call("GET", "/ui/api/jobs/" + daily + "/runs/x"), 404,
              "not_found");
  check_error(call("POST", "/ui/api/jobs"), 405, "method_not_allowed");
  check_error(call("POST", "/ui/api/jobs/" + daily), 405,
              "method_not_allowed");
  check_error(call("GET", "/ui/api/jobs/" + daily + "/run"), 405,
              "method_not_allowed");
  check_error(call("DELETE", "/ui/api/jobs/" + daily + "/runs"), 405,
              "method_not_allowed");
  // Without the key: closed.
  check_error(call("GET", "/ui/api/jobs", ""), 401, "not_logged_in");
  // Logged in by cookie, a change needs the CSRF token.
  auto login = request(sp->port, "POST", "/ui/api/login",
                       R"({"key":")" + the_key + R"("})");
  BOOST_REQUIRE_EQUAL(status_of(login), 200);
  auto set = header_of(login, "Set-Cookie");
  auto cookie = "Cookie: " + set.substr(0, set.find(';')) + "\r\n";
  auto csrf = body_of(login).get_string("csrf");
  BOOST_CHECK_EQUAL(status_of(call("GET", "/ui/api/jobs", cookie)), 200);
  check_error(call("POST", "/ui/api/jobs/" + daily + "/pause", cookie), 403,
              "bad_csrf_token");
  BOOST_CHECK(!ok("GET", "/ui/api/jobs/" + daily)["job"].get_bool("paused",
                                                                  true));
  auto r = call("POST", "/ui/api/jobs/" + daily + "/pause",
                cookie + "X-CSRF-Token: " + csrf + "\r\n");
  BOOST_CHECK_EQUAL(status_of(r), 200);
  // The server is still there and the job intact.
  BOOST_CHECK(ok("GET", "/ui/api/jobs/" + daily)["job"].get_bool("paused",
                                                                 false));
  BOOST_CHECK_EQUAL(sp->stop(), 0);
}

BOOST_AUTO_TEST_SUITE_END()
