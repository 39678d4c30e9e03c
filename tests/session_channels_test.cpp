#define BOOST_TEST_MODULE session_channels
// Per-session approval and clarify channels (runtime::set_session_channels,
// approvals/session_channels.hpp) and the new-session fields of turn_call
// (cwd, metadata).
#include "tests/support/paths.hpp"
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "approvals/session_channels.hpp"
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
  std::vector<std::string> asked; // "<channel>:<session>"

  ~fixture() { rt.reset(); } // its callbacks use the members above

  void start(const std::string& cron_mode = "deny") {
    auto opts = canary_options();
    opts.approvals.cron_mode = cron_mode;
    start_with(std::move(opts));
    // The runtime-wide channel denies and records who asked.
    rt->set_approval_callback([this](const approval_prompt& p) {
      std::lock_guard<std::mutex> guard{mtx};
      asked.push_back("global:" + p.session_id);
      return approval_choice::deny;
    });
  }

  session_channels approving(const std::string& tag) {
    session_channels ch;
    ch.approval = [this, tag](const approval_prompt& p) {
      std::lock_guard<std::mutex> guard{mtx};
      asked.push_back(tag + ":" + p.session_id);
      return approval_choice::once;
    };
    return ch;
  }

  // Runs `rm -rf <work>/<name>` in `session`; true when the canary is gone.
  bool rm(const std::string& name, const std::string& session,
          std::string* result = nullptr) {
    auto out = rm_canary(name, session);
    if (result != nullptr)
      *result = out;
    return !alive(name);
  }

  std::vector<std::string> taken() {
    std::lock_guard<std::mutex> guard{mtx};
    auto out = asked;
    asked.clear();
    return out;
  }
};

} // namespace

BOOST_AUTO_TEST_CASE(table_follows_aliases_and_forgets_them) {
  session_channel_table t;
  BOOST_CHECK(t.empty());
  BOOST_CHECK(!t.find("a"));
  session_channel ch;
  ch.context = approval_context::cron;
  t.set("parent", ch);
  t.alias("child", "parent");
  t.alias("grandchild", "child");
  BOOST_REQUIRE(t.find("grandchild"));
  BOOST_CHECK(t.find("grandchild")->context == approval_context::cron);
  BOOST_CHECK(!t.find("other"));
  // A cycle of aliases ends the lookup instead of looping.
  t.alias("x", "y");
  t.alias("y", "x");
  BOOST_CHECK(!t.find("x"));
  t.forget("grandchild");
  BOOST_CHECK(!t.find("grandchild"));
  BOOST_CHECK(t.find("child"));
  // Clearing the parent drops it and the aliases that point to it.
  t.clear("parent");
  BOOST_CHECK(!t.find("child"));
  BOOST_CHECK(t.empty());
}

BOOST_FIXTURE_TEST_SUITE(session_channels_runtime, fixture)

BOOST_AUTO_TEST_CASE(a_session_channel_replaces_the_runtime_wide_one) {
  start();
  rt->set_session_channels("editor", approving("editor"));
  BOOST_CHECK(rm("a", "editor"));
  BOOST_CHECK(!rm("b", "other"));
  auto who = taken();
  BOOST_REQUIRE_EQUAL(who.size(), 2u);
  BOOST_CHECK_EQUAL(who[0], "editor:editor");
  BOOST_CHECK_EQUAL(who[1], "global:other");
  // Cleared: the session is back on the runtime-wide channel.
  rt->clear_session_channels("editor");
  BOOST_CHECK(!rm("c", "editor"));
  who = taken();
  BOOST_REQUIRE_EQUAL(who.size(), 1u);
  BOOST_CHECK_EQUAL(who[0], "global:editor");
}

BOOST_AUTO_TEST_CASE(an_empty_channel_follows_its_context_key) {
  start("deny");
  session_channels ch;
  ch.context = approval_context::cron;
  rt->set_session_channels("run-1", ch);
  std::string out;
  BOOST_CHECK(!rm("a", "run-1", &out));
  BOOST_CHECK_MESSAGE(contains(out, "approvals.cron_mode"), out);
  // Nobody was asked: not the runtime-wide channel either.
  BOOST_CHECK(taken().empty());
}

BOOST_AUTO_TEST_CASE(cron_mode_approve_allows_but_never_a_hardline_command) {
  start("approve");
  session_channels ch;
  ch.context = approval_context::cron;
  rt->set_session_channels("run-2", ch);
  BOOST_CHECK(rm("a", "run-2"));
  BOOST_CHECK(taken().empty());
  json::value args;
  args["command"] = "rm -rf /";
  auto out = rt->call_tool({"run-2", "c-h", "terminal", args.dump()});
  BOOST_CHECK_MESSAGE(contains(out.result_json, "BLOCKED")
                        || contains(out.result_json, "hardline"),
                      out.result_json);
}

BOOST_AUTO_TEST_CASE(clarify_goes_to_the_sessions_own_channel) {
  start();
  rt->set_clarify_callback([](const clarify_prompt&) {
    return std::string{"from the runtime"};
  });
  session_channels ch;
  ch.clarify = [](const clarify_prompt& p) {
    return "from the editor about " + p.question;
  };
  rt->set_session_channels("editor", ch);
  json::value args;
  args["question"] = "colour?";
  auto a = rt->call_tool({"editor", "q1", "clarify", args.dump()});
  BOOST_CHECK_MESSAGE(contains(a.result_json, "from the editor about colour?"),
                      a.result_json);
  auto b = rt->call_tool({"other", "q2", "clarify", args.dump()});
  BOOST_CHECK_MESSAGE(contains(b.result_json, "from the runtime"),
                      b.result_json);
  // A session channel without clarify: unavailable there.
  rt->set_session_channels("run", session_channels{});
  auto c = rt->call_tool({"run", "q3", "clarify", args.dump()});
  BOOST_CHECK_MESSAGE(contains(c.result_json, "not available"),
                      c.result_json);
}

BOOST_AUTO_TEST_CASE(a_new_session_takes_the_calls_cwd_and_metadata) {
  start();
  server.script_chat(completion("done"));
  turn_call call;
  call.session_id = "meta-1";
  call.prompt = "hi";
  call.stream = false;
  call.cwd = work.path();
  call.metadata = R"({"cron_job_id":"job-7"})";
  auto out = rt->run_turn(call);
  BOOST_REQUIRE_MESSAGE(out.started, out.error);
  // A directory that does not exist fails the turn as a config error.
  turn_call bad = call;
  bad.session_id = "meta-2";
  bad.cwd = work.path() + "/gone";
  auto failed = rt->run_turn(bad);
  BOOST_CHECK(failed.config_error);
  BOOST_CHECK_MESSAGE(contains(failed.error, "does not exist"), failed.error);
  rt.reset();
  session_store_options so;
  so.dir = session_store::default_dir(home.path());
  auto st = session_store::open(so);
  BOOST_REQUIRE_MESSAGE(st, st.error);
  auto s = (*st)->get_session("meta-1");
  BOOST_REQUIRE(s);
  BOOST_CHECK_EQUAL(s->cwd, work.path());
  auto m = json::parse(s->metadata_json);
  BOOST_REQUIRE_MESSAGE(m, s->metadata_json);
  BOOST_CHECK_EQUAL(m.v->get_string("cron_job_id"), "job-7");
  BOOST_CHECK(!(*st)->get_session("meta-2"));
}

BOOST_AUTO_TEST_SUITE_END()
