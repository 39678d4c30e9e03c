// The agent loop at its limits: resume from the store, provider and
// configuration errors, toolsets, an unavailable store, oversized results
// and answers that cannot be stored (the happy paths and interrupts are in
// agent_loop_test.cpp).
#define BOOST_TEST_MODULE agent_loop_limits
#include <boost/test/unit_test.hpp>


#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

#include "agent/turn_result.hpp"
#include "base/json.hpp"
#include "runtime/runtime.hpp"
#include "storage/session_store.hpp"
#include "tests/support/agent_fixture.hpp"
#include "tests/support/agent_loop_fixture.hpp"
#include "tests/support/http_server.hpp"
#include "tests/support/scripted_flood.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wait_until.hpp"

using namespace mibyan;
using namespace std::chrono;
using namespace mibyan::test::agent_loop;

BOOST_FIXTURE_TEST_SUITE(agent_loop_limits, fixture)

BOOST_AUTO_TEST_CASE(resume_loads_persisted_history) {
  script(completion("remembered"));
  std::string sid;
  run(call("my name is Ada"), &sid);
  rt.reset();
  start(); // a fresh runtime: the conversation is loaded from the store
  script(completion("Your name is Ada."));
  auto res = run(call("what is my name?", sid));
  BOOST_CHECK_EQUAL(res["final_response"].as_string(), "Your name is Ada.");
  auto reqs = requests();
  BOOST_REQUIRE_EQUAL(reqs.size(), 2u);
  auto& msgs = reqs[1]["messages"];
  BOOST_REQUIRE_EQUAL(msgs.size(), 4u);
  BOOST_CHECK_EQUAL(content_of(msgs.as_array()[1]), "my name is Ada");
  BOOST_CHECK_EQUAL(content_of(msgs.as_array()[2]), "remembered");
  BOOST_CHECK_EQUAL(reqs[0]["messages"].as_array()[0].dump(),
                    msgs.as_array()[0].dump());
}

BOOST_AUTO_TEST_CASE(provider_error_fails_the_turn) {
  json::value s;
  s["path"] = "/v1/chat/completions";
  s["status"] = 400;
  s["body"] = R"({"error":{"message":"bad model name"}})";
  server.script(s.dump());
  auto res = run(call("hi"));
  BOOST_CHECK(res["failed"].as_bool());
  BOOST_CHECK(!res["completed"].as_bool());
  BOOST_CHECK_MESSAGE(contains(res["error"].as_string(), "bad model name"),
                      res["error"].as_string());
}

BOOST_AUTO_TEST_CASE(configuration_errors) {
  auto c = call("hi");
  c.provider.provider.clear();
  c.provider.base_url.clear();
  auto out = rt->run_turn(c);
  BOOST_CHECK(out.config_error);
  BOOST_CHECK(contains(out.error, "No model provider is configured"));
  c = call("hi");
  c.provider.provider = "no-such-provider";
  out = rt->run_turn(c);
  BOOST_CHECK(out.config_error);
  BOOST_CHECK(!out.error.empty());
  c = call("hi");
  c.toolsets = {"no_such_toolset"};
  out = rt->run_turn(c);
  BOOST_CHECK(out.config_error);
  BOOST_CHECK(contains(out.error, "no_such_toolset"));
  c = call("");
  out = rt->run_turn(c);
  BOOST_CHECK(!out.error.empty());
  BOOST_CHECK(requests().empty());
}

BOOST_AUTO_TEST_CASE(toolsets_filter_the_offered_tools) {
  script(completion("ok"));
  auto c = call("hi");
  c.toolsets = {"file"};
  run(c);
  auto reqs = requests();
  BOOST_REQUIRE_EQUAL(reqs.size(), 1u);
  auto tools = reqs[0]["tools"].dump();
  BOOST_CHECK(contains(tools, "read_file"));
  BOOST_CHECK(!contains(tools, "\"terminal\""));
  BOOST_CHECK(!contains(tools, "execute_code"));
}

BOOST_AUTO_TEST_CASE(store_unavailable_fails_clearly) {
  rt.reset();
  // A file where the store directory should be.
  auto dir = session_store::default_dir(home.path());
  std::filesystem::remove_all(dir);
  std::ofstream{dir} << "not a dir";
  start();
  auto out = rt->run_turn(call("hi"));
  BOOST_CHECK(!out.error.empty());
  BOOST_CHECK(contains(out.error, "session store"));
  BOOST_CHECK(requests().empty());
}

// Issue 14 item 1: an oversized tool result is spilled privately under
// $MIBYAN_HOME/cache/results/<session>/, never to a shared temp path.
BOOST_AUTO_TEST_CASE(oversized_results_are_spilled_privately) {
  rt.reset();
  options opts;
  opts.home = home.path();
  opts.agent.api_max_retries = 1;
  opts.tool_output.max_bytes = 400000;
  std::string err;
  auto made2 = create_runtime(opts);
  BOOST_REQUIRE_MESSAGE(made2, made2.error);
  rt = std::move(*made2);
  auto cmd = args_json("command", "head -c 150000 /dev/zero | tr '\\0' q");
  script(completion("", {{"call_1", "terminal", cmd}}));
  script(completion("done"));
  std::string sid;
  auto res = run(call("read them"), &sid);
  BOOST_CHECK(res["completed"].as_bool());
  auto reqs = requests();
  BOOST_REQUIRE_EQUAL(reqs.size(), 2u);
  auto root = home.path() + "/cache/results/";
  std::string spilled;
  for (auto& t : with_role(reqs[1], "tool")) {
    auto text = content_of(t);
    BOOST_CHECK(!contains(text, "mibyan-results"));
    auto at = text.find(root);
    if (at != std::string::npos && spilled.empty()) {
      auto end = text.find_first_of(" \n\")'", at);
      spilled = text.substr(at, end - at);
    }
  }
  BOOST_REQUIRE_MESSAGE(!spilled.empty(),
                        "no result was spilled under " + root + ": "
                          + content_of(with_role(reqs[1], "tool")[0])
                              .substr(0, 300));
  while (!spilled.empty() && spilled.back() == '.')
    spilled.pop_back();
  BOOST_CHECK(contains(spilled, "/cache/results/" + sid + "/"));
  struct stat st;
  BOOST_REQUIRE_MESSAGE(::lstat(spilled.c_str(), &st) == 0, spilled);
  BOOST_CHECK_EQUAL(st.st_mode & 0777, 0600u);
  BOOST_REQUIRE(::stat((home.path() + "/cache/results/" + sid).c_str(), &st)
                == 0);
  BOOST_CHECK_EQUAL(st.st_mode & 0777, 0700u);
}

// Issue 14 item 2: a provider response larger than
// provider.max_response_bytes stops the transfer and fails the request
// once, clearly, streamed or not.
BOOST_AUTO_TEST_CASE(oversized_provider_responses_fail_without_retry) {
  rt.reset();
  options opts;
  opts.home = home.path();
  opts.agent.api_max_retries = 3;
  opts.provider.max_response_bytes = 64 * 1024;
  std::string err;
  auto made3 = create_runtime(opts);
  BOOST_REQUIRE_MESSAGE(made3, made3.error);
  rt = std::move(*made3);
  // Streamed: about 2 MB of deltas.
  auto s = test::delta_flood(2000);
  s["times"] = 3;
  server.script(s.dump());
  auto c = call("stream a lot");
  c.stream = true;
  auto res = run(c);
  BOOST_CHECK(res["failed"].as_bool());
  BOOST_CHECK_MESSAGE(contains(res["error"].as_string(),
                               "provider.max_response_bytes"),
                      res["error"].as_string());
  BOOST_CHECK_EQUAL(requests().size(), 1u); // not retried
  // Not streamed: one JSON body over the cap.
  server.reset();
  script(completion(std::string(200 * 1024, 'j')), 3);
  res = run(call("answer a lot"));
  BOOST_CHECK(res["failed"].as_bool());
  BOOST_CHECK_MESSAGE(contains(res["error"].as_string(),
                               "provider.max_response_bytes"),
                      res["error"].as_string());
  BOOST_CHECK_EQUAL(requests().size(), 1u);
}

// Issue 14 item 2: an answer the store refuses (over its 16 MiB message
// limit) fails the turn instead of being dropped silently.
BOOST_AUTO_TEST_CASE(an_answer_that_cannot_be_stored_fails_the_turn) {
  script(completion(std::string((17u << 20), 'a')));
  auto res = run(call("say a lot"));
  BOOST_CHECK(res["failed"].as_bool());
  BOOST_CHECK(!res["completed"].as_bool());
  BOOST_CHECK_MESSAGE(contains(res["error"].as_string(),
                               "cannot store the final answer"),
                      res["error"].as_string());
}

// Issue 14: a lone surrogate from the provider is replaced with U+FFFD; the
// turn completes with one request instead of failing after retries.
BOOST_AUTO_TEST_CASE(a_lone_surrogate_answer_is_sanitised_not_retried) {
  auto body = completion("PLACEHOLDER");
  auto at = body.find("PLACEHOLDER");
  body.replace(at, 11, "half \\ud83d of a pair \xFF");
  script(body, 3);
  std::string sid;
  auto res = run(call("hi"), &sid);
  BOOST_CHECK(res["completed"].as_bool());
  BOOST_CHECK_EQUAL(res["final_response"].as_string(),
                    "half \xEF\xBF\xBD of a pair \xEF\xBF\xBD");
  BOOST_CHECK_EQUAL(requests().size(), 1u);
  auto msgs = stored(sid);
  BOOST_REQUIRE_EQUAL(msgs.size(), 2u);
  BOOST_CHECK_EQUAL(msgs[1].message.content,
                    "half \xEF\xBF\xBD of a pair \xEF\xBF\xBD");
}

// Tool results commit while the next model call runs (docs/agent_loop.md,
// "Persist before execute"). When that commit fails (here: the session was
// deleted while the tool ran), the turn still fails with the store's error,
// the model's next answer is neither stored nor acted on, and the caller
// gets its result; whether the model answered before or after the failed
// commit (answer_delay_ms) changes nothing.
BOOST_AUTO_TEST_CASE(a_tool_result_that_cannot_be_stored_fails_the_turn) {
  for (int answer_delay_ms : {0, 3000}) {
    BOOST_TEST_CONTEXT("model answers after " << answer_delay_ms << " ms") {
      server.reset();
      auto tag = std::to_string(answer_delay_ms);
      auto marker = work.path() + "/started-" + tag;
      auto go = work.path() + "/go-" + tag;
      json::value targs;
      targs["command"] = "touch '" + marker + "'; while [ ! -e '" + go
                         + "' ]; do sleep 0.02; done; echo tool-ran";
      script(completion("", {{"call_wait", "terminal", targs.dump()}}));
      json::value second;
      second["command"] = "touch '" + work.path() + "/second-" + tag + "'";
      script(completion("", {{"call_second", "terminal", second.dump()}}), 1,
             answer_delay_ms);
      std::string sid = "unstorable-results-" + tag;
      std::optional<turn_result> out;
      std::thread th([&] { out = rt->run_turn(call("wait for go", sid)); });
      BOOST_REQUIRE(test::wait_until(
        [&] { return ::access(marker.c_str(), F_OK) == 0; }));
      auto store = session_store_of(*rt);
      BOOST_REQUIRE(store);
      auto del = store->delete_session(sid);
      BOOST_REQUIRE_MESSAGE(del.ok(), del.error);
      work.write("go-" + tag, "");
      th.join();
      BOOST_REQUIRE(out);
      BOOST_REQUIRE_MESSAGE(out->started, out->error);
      BOOST_CHECK(out->failed);
      BOOST_CHECK(!out->completed);
      BOOST_CHECK_MESSAGE(contains(out->error, "cannot store the tool results"),
                          out->error);
      // The second answer's tool call never ran.
      BOOST_CHECK(::access((work.path() + "/second-" + tag).c_str(), F_OK)
                  != 0);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
