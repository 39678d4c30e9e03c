// Approvals and clarify questions waiting for an answer
// (runtime/pending_approvals.*, docs/approvals.md, "HTTP approvals"): the
// runtime's pending registry on its own (answers, ids, the ends of a wait),
// then an embedding host that opts in and answers from its watcher, or
// interrupts or destroys the runtime while a command waits. Over HTTP:
// http_approvals_test.
#define BOOST_TEST_MODULE pending_approvals
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <future>
#include <mutex>
#include <set>
#include <thread>

#include "runtime/pending_approvals.hpp"
#include "tests/support/agent_fixture.hpp"

using namespace mibyan;
using namespace std::chrono;
namespace fs = std::filesystem;


// -- the registry on its own ---------------------------------------------------

namespace {

approval_prompt prompt_for(const std::string& session,
                           const std::atomic<bool>* cancelled,
                           seconds timeout = seconds{30}) {
  approval_prompt p;
  p.session_id = session;
  p.command = "rm -rf ./x";
  p.descriptions = {"recursive rm"};
  p.timeout = timeout;
  p.cancelled = cancelled;
  return p;
}

// Waits (bounded) until `reg` lists `n` requests of `kind`.
std::vector<pending_request> wait_listed(pending_approvals& reg,
                                         pending_kind kind, size_t n) {
  auto deadline = steady_clock::now() + seconds{30};
  auto l = reg.list(kind);
  while (l.size() < n && steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds{5});
    l = reg.list(kind);
  }
  BOOST_REQUIRE_EQUAL(l.size(), n);
  return l;
}

} // namespace

BOOST_AUTO_TEST_SUITE(registry)

BOOST_AUTO_TEST_CASE(an_answer_ends_the_wait_and_a_second_one_is_refused) {
  pending_approvals reg;
  std::vector<std::string> events;
  std::mutex ev_mtx;
  auto token = reg.watch([&](const pending_event& e) {
    std::lock_guard<std::mutex> g{ev_mtx};
    events.push_back((e.what == pending_event::type::added ? "added:"
                                                            : "ended:")
                     + e.request.id + ":" + e.outcome);
  });
  std::atomic<bool> never{false};
  auto f = std::async(std::launch::async,
                      [&] { return reg.ask(prompt_for("s1", &never)); });
  auto l = wait_listed(reg, pending_kind::approval, 1);
  const auto& r = l[0];
  BOOST_CHECK(pending_approvals::well_formed(r.id, pending_kind::approval));
  BOOST_CHECK(!pending_approvals::well_formed(r.id, pending_kind::clarify));
  BOOST_CHECK_EQUAL(r.session_id, "s1");
  BOOST_CHECK_EQUAL(r.command, "rm -rf ./x");
  BOOST_CHECK((r.choices
               == std::vector<std::string>{"once", "session", "always",
                                           "deny"}));
  BOOST_CHECK_EQUAL(r.expires_at_ms - r.created_at_ms, 30000);
  BOOST_CHECK(reg.answer(r.id, std::string{"text"}) == pending_answer::unknown);
  BOOST_CHECK(reg.answer(r.id, approval_choice::session) == pending_answer::ok);
  auto second = reg.answer(r.id, approval_choice::deny);
  BOOST_CHECK(second == pending_answer::already_answered
              || second == pending_answer::ended);
  BOOST_CHECK(f.get() == approval_choice::session);
  BOOST_CHECK(reg.answer(r.id, approval_choice::once) == pending_answer::ended);
  BOOST_CHECK(reg.answer("apr_" + std::string(32, '0'), approval_choice::once)
              == pending_answer::unknown);
  BOOST_CHECK(reg.list(pending_kind::approval).empty());
  reg.unwatch(token);
  std::lock_guard<std::mutex> g{ev_mtx};
  BOOST_REQUIRE_EQUAL(events.size(), 2u);
  BOOST_CHECK_EQUAL(events[0], "added:" + r.id + ":");
  BOOST_CHECK_EQUAL(events[1], "ended:" + r.id + ":session");
}

BOOST_AUTO_TEST_CASE(ids_are_unique_and_unguessable_in_form) {
  pending_approvals reg;
  std::atomic<bool> never{false};
  std::vector<std::future<approval_choice>> fs;
  for (int i = 0; i < 8; ++i)
    fs.push_back(std::async(std::launch::async, [&, i] {
      return reg.ask(prompt_for("s" + std::to_string(i), &never));
    }));
  auto l = wait_listed(reg, pending_kind::approval, 8);
  std::set<std::string> ids;
  for (auto& r : l) {
    BOOST_CHECK(pending_approvals::well_formed(r.id, pending_kind::approval));
    ids.insert(r.id);
  }
  BOOST_CHECK_EQUAL(ids.size(), 8u);
  for (auto& r : l)
    BOOST_CHECK(reg.answer(r.id, approval_choice::deny) == pending_answer::ok);
  for (auto& f : fs)
    BOOST_CHECK(f.get() == approval_choice::deny);
  for (auto bad : {"", "apr_", "apr_0", "APR_00000000000000000000000000000000",
                   "apr_0000000000000000000000000000000g",
                   "apr_000000000000000000000000000000000",
                   "clr_00000000000000000000000000000000", "../etc/passwd"})
    BOOST_CHECK_MESSAGE(!pending_approvals::well_formed(bad,
                                                        pending_kind::approval),
                        bad);
}

BOOST_AUTO_TEST_CASE(time_cancel_flag_session_cancel_and_shutdown_end_waits) {
  pending_approvals reg;
  std::atomic<bool> never{false};
  // No answer in time: timeout.
  BOOST_CHECK(reg.ask(prompt_for("s", &never, seconds{1}))
              == approval_choice::timeout);
  // The call's cancel flag: deny.
  std::atomic<bool> flag{false};
  auto f1 = std::async(std::launch::async,
                       [&] { return reg.ask(prompt_for("s", &flag)); });
  auto id1 = wait_listed(reg, pending_kind::approval, 1)[0].id;
  flag = true;
  BOOST_CHECK(f1.get() == approval_choice::deny);
  BOOST_CHECK(reg.answer(id1, approval_choice::once) == pending_answer::ended);
  // cancel_session reaches the session's subagents, not other sessions.
  auto child = std::async(std::launch::async, [&] {
    return reg.ask(prompt_for("p::child::1.a", &never));
  });
  auto other = std::async(std::launch::async,
                          [&] { return reg.ask(prompt_for("p2", &never)); });
  wait_listed(reg, pending_kind::approval, 2);
  reg.cancel_session("p");
  BOOST_CHECK(child.get() == approval_choice::deny);
  auto left = wait_listed(reg, pending_kind::approval, 1);
  BOOST_CHECK_EQUAL(left[0].session_id, "p2");
  // A clarify question waits too; shutdown ends everything.
  clarify_prompt q;
  q.session_id = "p3";
  q.question = "Which one?";
  q.choices = {"a", "b"};
  q.cancelled = &never;
  auto fq = std::async(std::launch::async, [&] { return reg.ask(q); });
  auto ql = wait_listed(reg, pending_kind::clarify, 1);
  BOOST_CHECK(pending_approvals::well_formed(ql[0].id, pending_kind::clarify));
  BOOST_CHECK_EQUAL(ql[0].question, "Which one?");
  reg.shutdown();
  BOOST_CHECK(other.get() == approval_choice::deny);
  BOOST_CHECK_EQUAL(fq.get(), "");
  // After shutdown nothing waits.
  BOOST_CHECK(reg.ask(prompt_for("s", &never)) == approval_choice::deny);
  BOOST_CHECK_EQUAL(reg.size(), 0u);
}

BOOST_AUTO_TEST_CASE(a_clarify_answer_is_returned) {
  pending_approvals reg;
  std::atomic<bool> never{false};
  clarify_prompt q;
  q.session_id = "s";
  q.question = "Colour?";
  q.cancelled = &never;
  q.timeout = seconds{30};
  auto f = std::async(std::launch::async, [&] { return reg.ask(q); });
  auto id = wait_listed(reg, pending_kind::clarify, 1)[0].id;
  BOOST_CHECK(reg.answer(id, approval_choice::once) == pending_answer::unknown);
  BOOST_CHECK(reg.answer(id, std::string{"blue"}) == pending_answer::ok);
  BOOST_CHECK(reg.answer(id, std::string{"red"})
                == pending_answer::already_answered
              || reg.answer(id, std::string{"red"}) == pending_answer::ended);
  BOOST_CHECK_EQUAL(f.get(), "blue");
  // Without an answer in time: "".
  q.timeout = seconds{1};
  BOOST_CHECK_EQUAL(reg.ask(q), "");
}

BOOST_AUTO_TEST_SUITE_END()

// -- an embedding host that opts in ---------------------------------------------

namespace {

struct host_fixture : test::agent_fixture {
  test::temp_dir work;

  options pending_options() {
    auto o = base_options();
    o.approvals.unattended_mode = "deny";
    return o;
  }

  std::string rm_call(const std::string& name) {
    json::value a;
    a["command"] = "rm -rf ./" + name;
    a["workdir"] = work.path();
    return test::chat_completion("", {{"call_1", "terminal", a.dump()}});
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(embedding_host, host_fixture)

BOOST_AUTO_TEST_CASE(a_host_answers_from_its_watcher) {
  work.write("build-output/a.o", "x");
  start(pending_options());
  rt->use_pending_channels({true, false});
  std::mutex mtx;
  std::vector<std::string> seen;
  // The host's "user" approves for the session as soon as it is asked.
  auto token = rt->watch_pending([&](const pending_event& e) {
    {
      std::lock_guard<std::mutex> g{mtx};
      seen.push_back(e.what == pending_event::type::added
                       ? "added " + e.request.command
                       : "ended " + e.outcome);
    }
    if (e.what == pending_event::type::added)
      BOOST_CHECK(rt->answer_approval(e.request.id, approval_choice::session)
                  == pending_answer::ok);
  });
  script(rm_call("build-output"));
  script(test::chat_completion("removed"));
  auto r = run(call("clean"));
  BOOST_CHECK_EQUAL(r.get_string("final_response", ""), "removed");
  BOOST_CHECK(!fs::exists(work / "build-output"));
  rt->unwatch_pending(token);
  std::lock_guard<std::mutex> g{mtx};
  BOOST_REQUIRE_EQUAL(seen.size(), 2u);
  BOOST_CHECK_EQUAL(seen[0], "added rm -rf ./build-output");
  BOOST_CHECK_EQUAL(seen[1], "ended session");
}

BOOST_AUTO_TEST_CASE(interrupt_and_destruction_end_a_wait) {
  work.write("build-output/a.o", "x");
  start(pending_options());
  rt->use_pending_channels({true, true});
  // An interrupt: the turn ends without waiting approvals.timeout (60 s).
  script(rm_call("build-output"));
  script(test::chat_completion("never"));
  std::promise<turn_result> done;
  auto c = call("clean", "host-1");
  rt->run_turn_async(c, [&](turn_result o) { done.set_value(std::move(o)); });
  BOOST_REQUIRE(wait_for(
    [&] { return rt->pending_requests(pending_kind::approval).size() == 1; },
    30));
  auto id = rt->pending_requests(pending_kind::approval)[0].id;
  rt->interrupt("host-1", "the host gave up");
  auto f = done.get_future();
  BOOST_REQUIRE(f.wait_for(seconds{30}) == std::future_status::ready);
  BOOST_CHECK(rt->pending_requests(pending_kind::approval).empty());
  BOOST_CHECK(rt->answer_approval(id, approval_choice::once)
              == pending_answer::ended);
  BOOST_CHECK(fs::exists(work / "build-output"));
  // Destroying the runtime while a command waits: no hang, the turn's
  // callback still comes.
  server.reset();
  script(rm_call("build-output"));
  script(test::chat_completion("never either"));
  std::promise<turn_result> done2;
  rt->run_turn_async(call("clean", "host-2"),
                     [&](turn_result o) { done2.set_value(std::move(o)); });
  BOOST_REQUIRE(wait_for(
    [&] { return rt->pending_requests(pending_kind::approval).size() == 1; },
    30));
  auto f2 = done2.get_future();
  rt.reset();
  BOOST_CHECK(f2.wait_for(seconds{30}) == std::future_status::ready);
  BOOST_CHECK(fs::exists(work / "build-output"));
}

BOOST_AUTO_TEST_SUITE_END()
