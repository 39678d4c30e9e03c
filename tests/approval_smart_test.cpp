#define BOOST_TEST_MODULE approval_smart
#include "tests/support/paths.hpp"
#include <boost/test/unit_test.hpp>

// Smart mode through the embedding API: the scripted provider plays the
// reviewer model, a host approval callback plays the human
// (docs/approvals.md). Commands only ever delete canaries in a temp dir.

#include <deque>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include "base/json.hpp"
#include "runtime/runtime.hpp"
#include "storage/session_store.hpp"
#include "tests/support/canary_fixture.hpp"
#include "tests/support/http_server.hpp"
#include "tests/support/scripted_replies.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mibyan;
namespace fs = std::filesystem;

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

using test::completion;

struct fixture : test::canary_fixture {
  std::vector<approval_prompt> prompts;
  std::deque<approval_choice> answers;

  ~fixture() { rt.reset(); } // its callbacks use the members above

  void start(bool human, const std::string& unattended = "deny") {
    auto opts = canary_options();
    opts.approvals.mode = "smart";
    opts.approvals.guardian_timeout = 1;
    opts.approvals.timeout = 10;
    opts.approvals.unattended_mode = unattended;
    start_with(std::move(opts));
    if (human)
      rt->set_approval_callback([this](const approval_prompt& p) {
        std::lock_guard<std::mutex> guard{mtx};
        prompts.push_back(p);
        if (answers.empty())
          return approval_choice::deny;
        auto a = answers.front();
        answers.pop_front();
        return a;
      });
  }

  void reviewer(const std::string& verdict, int delay_ms = 0) {
    json::value s;
    s["path"] = "/v1/chat/completions";
    s["status"] = 200;
    s["body"] = completion(verdict);
    if (delay_ms > 0)
      s["delay_ms"] = delay_ms;
    server.script(s.dump());
  }

  // Runs `rm -rf <work>/<name>` (the canary directory) in session s.
  json::value rm(const std::string& name, const std::string& session = "s") {
    auto parsed = json::parse(rm_canary(name, session));
    BOOST_REQUIRE(parsed);
    return *parsed.v;
  }

  size_t prompt_count() {
    std::lock_guard<std::mutex> guard{mtx};
    return prompts.size();
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(approval_smart, fixture)

BOOST_AUTO_TEST_CASE(verdicts_with_a_human) {
  start(true);
  // APPROVE: runs, nobody asked.
  reviewer("APPROVE");
  auto r = rm("a");
  BOOST_CHECK_EQUAL(r.get_int("exit_code", -1), 0);
  BOOST_CHECK(!alive("a"));
  BOOST_CHECK_EQUAL(prompt_count(), 0u);
  // The reviewer saw the command as data, with the matched description.
  auto reqs = json::parse(server.requests());
  BOOST_REQUIRE(reqs);
  auto body = reqs.v->as_array().at(0).find("body")->as_string();
  BOOST_CHECK(contains(body, "<<<COMMAND"));
  BOOST_CHECK(contains(body, "recursive rm"));
  BOOST_CHECK(contains(body, "APPROVE, DENY or ESCALATE"));
  // ESCALATE: the human decides (once).
  reviewer("ESCALATE");
  answers = {approval_choice::once};
  r = rm("b");
  BOOST_CHECK_EQUAL(r.get_int("exit_code", -1), 0);
  BOOST_CHECK(!alive("b"));
  BOOST_REQUIRE_EQUAL(prompt_count(), 1u);
  BOOST_CHECK_EQUAL(prompts[0].guardian_verdict, "ESCALATE");
  BOOST_CHECK_EQUAL(prompts[0].session_id, "s");
  // Garbage: escalates to the human (deny).
  reviewer("Sure, looks fine to me!");
  r = rm("c");
  BOOST_CHECK_EQUAL(r.get_string("status"), "blocked");
  BOOST_CHECK(contains(r.get_string("error"), "the user denied"));
  BOOST_CHECK(alive("c"));
  BOOST_REQUIRE_EQUAL(prompt_count(), 2u);
  BOOST_CHECK_EQUAL(prompts[1].guardian_verdict, "ESCALATE");
  // The reviewer times out: escalates as well.
  reviewer("APPROVE", 3000);
  answers = {approval_choice::deny};
  r = rm("d");
  BOOST_CHECK_EQUAL(r.get_string("status"), "blocked");
  BOOST_CHECK(alive("d"));
  BOOST_REQUIRE_EQUAL(prompt_count(), 3u);
  BOOST_CHECK_EQUAL(prompts[2].guardian_verdict, "unavailable");
  // Human denials never counted: no breaker suffix so far.
  BOOST_CHECK(!contains(r.get_string("error"), "consecutive"));
}

BOOST_AUTO_TEST_CASE(three_reviewer_denials_trip_the_breaker) {
  start(true);
  std::vector<json::value> results;
  for (auto name : {"a", "b", "c", "d"}) {
    reviewer("DENY");
    results.push_back(rm(name));
  }
  for (auto name : {"a", "b", "c", "d"})
    BOOST_CHECK(alive(name));
  BOOST_CHECK(!contains(results[0].get_string("error"), "consecutive"));
  BOOST_CHECK(!contains(results[1].get_string("error"), "consecutive"));
  BOOST_CHECK(contains(results[2].get_string("error"),
                       "3 consecutive commands were blocked by the security "
                       "reviewer"));
  BOOST_CHECK(contains(results[3].get_string("error"), "4 consecutive"));
  BOOST_REQUIRE_EQUAL(prompt_count(), 4u);
  BOOST_CHECK_EQUAL(prompts[0].guardian_verdict, "DENY");
  BOOST_CHECK(!prompts[0].allow_always);
  // A human grant resets the count.
  reviewer("DENY");
  answers = {approval_choice::once};
  BOOST_CHECK_EQUAL(rm("e").get_int("exit_code", -1), 0);
  reviewer("DENY");
  BOOST_CHECK(!contains(rm("f").get_string("error"), "consecutive"));
}

BOOST_AUTO_TEST_CASE(reviewer_deny_without_a_human) {
  start(false, "approve");
  reviewer("DENY");
  auto r = rm("a");
  BOOST_CHECK(contains(r.get_string("error"),
                       "BLOCKED by smart approval: recursive rm"));
  BOOST_CHECK(contains(r.get_string("error"), "must not")
              || contains(r.get_string("error"), "Do not retry"));
  BOOST_CHECK(alive("a"));
  reviewer("APPROVE");
  BOOST_CHECK_EQUAL(rm("b").get_int("exit_code", -1), 0);
  reviewer("ESCALATE");
  r = rm("c");
  BOOST_CHECK(contains(r.get_string("error"), "no user is present"));
  BOOST_CHECK(alive("c"));
  reviewer("APPROVE", 3000); // times out: nobody to escalate to
  r = rm("d");
  BOOST_CHECK_EQUAL(r.get_string("status"), "blocked");
  BOOST_CHECK(alive("d"));
}

BOOST_AUTO_TEST_CASE(session_grant_is_stored_with_the_session) {
  start(true);
  reviewer("ESCALATE");
  answers = {approval_choice::session};
  BOOST_CHECK_EQUAL(rm("a", "persist-1").get_int("exit_code", -1), 0);
  // Granted: the reviewer is not asked again in this session.
  BOOST_CHECK_EQUAL(rm("b", "persist-1").get_int("exit_code", -1), 0);
  BOOST_CHECK_EQUAL(prompt_count(), 1u);
  rt.reset();
  session_store_options so;
  so.dir = session_store::default_dir(home.path());
  auto st = session_store::open(so);
  BOOST_REQUIRE_MESSAGE(st, st.error);
  auto keys = (*st)->get_approvals("persist-1");
  BOOST_REQUIRE(keys);
  BOOST_REQUIRE_EQUAL(keys->size(), 1u);
  BOOST_CHECK_EQUAL(keys->at(0), "recursive rm");
}

BOOST_AUTO_TEST_SUITE_END()
