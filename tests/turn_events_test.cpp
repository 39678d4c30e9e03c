#define BOOST_TEST_MODULE turn_events
#include <boost/test/unit_test.hpp>

// The runtime's turn-event hub (runtime/turn_events.hpp) on its own:
// formatting, the running table, bounded queues with the lagged marker,
// one wake per batch, unsubscribe; then with a real runtime: every turn of
// run_turn_async is published, with or without the channel's callbacks.

#include <atomic>
#include <thread>

#include "base/json.hpp"
#include "runtime/runtime.hpp"
#include "runtime/turn_events.hpp"
#include "tests/support/http_server.hpp"
#include "tests/support/scripted_replies.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mibyan;

namespace {

json::value data_of(const turn_event_ptr& e) {
  auto parsed = json::parse(e->data);
  BOOST_REQUIRE_MESSAGE(parsed, e->data);
  return *parsed.v;
}

} // namespace

BOOST_AUTO_TEST_CASE(events_are_formatted_and_the_running_table_kept) {
  turn_event_hub hub;
  std::atomic<int> wakes{0};
  auto sub = hub.subscribe(100, [&] { ++wakes; });
  BOOST_TEST(hub.active());
  auto token = hub.turn_started(
    running_turn{"s1", 0, std::string(600, 'p') + "\xC3\xA9", "m", "api"});
  BOOST_TEST(hub.running().size() == 1u);
  BOOST_TEST(hub.running()[0].prompt.size() < 600u);
  hub.delta("s1", "text", "he\"llo\n");
  tool_event start;
  start.call_id = "c1";
  start.tool = "execute_code";
  start.args_json = "print(1)";
  hub.tool("s1", start);
  tool_event end = start;
  end.what = tool_event::phase::end;
  end.result_json = std::string(20000, 'r');
  end.duration_us = 5;
  hub.tool("s1", end);
  hub.turn_ended(token, "completed");
  BOOST_TEST(hub.running().empty());
  // One wake for the whole batch (the first event armed it).
  BOOST_TEST(wakes.load() == 1);
  auto evs = sub->take();
  BOOST_REQUIRE_EQUAL(evs.size(), 5u);
  BOOST_TEST(evs[0]->name == "turn_start");
  BOOST_TEST(data_of(evs[0]).get_string("session_id", "") == "s1");
  BOOST_TEST(data_of(evs[0]).get_int("started_at_ms", 0) > 0);
  BOOST_TEST(evs[1]->name == "delta");
  BOOST_TEST(data_of(evs[1]).get_string("text", "") == "he\"llo\n");
  BOOST_TEST(evs[1]->data.find('\n') == std::string::npos); // one SSE line
  BOOST_TEST(evs[1]->sse == "event: delta\ndata: " + evs[1]->data + "\n\n");
  BOOST_TEST(evs[2]->name == "tool_start");
  BOOST_TEST(data_of(evs[2]).get_string("arguments", "") == "print(1)");
  BOOST_TEST(data_of(evs[2]).get_string("session_id", "") == "s1");
  BOOST_TEST(evs[3]->name == "tool_end");
  auto result = data_of(evs[3]).get_string("result", "");
  BOOST_TEST(result.size() < 9000u);
  BOOST_TEST(result.find("[truncated]") != std::string::npos);
  BOOST_TEST(evs[4]->name == "turn_end");
  BOOST_TEST(data_of(evs[4]).get_string("outcome", "") == "completed");
  // Taken: the next event wakes again.
  hub.delta("s2", "text", "x");
  BOOST_TEST(wakes.load() == 2);
  hub.unsubscribe(sub);
  BOOST_TEST(!hub.active());
  hub.delta("s2", "text", "y");
  BOOST_TEST(wakes.load() == 2);
}

BOOST_AUTO_TEST_CASE(a_full_queue_drops_and_reports_lagged) {
  turn_event_hub hub;
  auto slow = hub.subscribe(4, [] {});
  auto fast = hub.subscribe(1000, [] {});
  for (int i = 0; i < 10; ++i)
    hub.delta("s", "text", std::to_string(i));
  auto got = slow->take();
  BOOST_REQUIRE_EQUAL(got.size(), 5u);
  BOOST_TEST(data_of(got[3]).get_string("text", "") == "3");
  BOOST_TEST(got[4]->name == "lagged");
  BOOST_TEST(data_of(got[4]).get_int("lost", 0) == 6);
  BOOST_TEST(slow->lost_total() == 6u);
  // The other subscriber lost nothing.
  BOOST_TEST(fast->take().size() == 10u);
  // After the take the slow one receives again, without a new marker.
  hub.delta("s", "text", "again");
  got = slow->take();
  BOOST_REQUIRE_EQUAL(got.size(), 1u);
  BOOST_TEST(got[0]->name == "delta");
}

BOOST_AUTO_TEST_CASE(publishing_from_many_threads_while_subscribing) {
  turn_event_hub hub;
  std::atomic<bool> stop{false};
  std::vector<std::thread> pubs;
  for (int t = 0; t < 4; ++t)
    pubs.emplace_back([&, t] {
      while (!stop) {
        auto k = hub.turn_started(running_turn{"t" + std::to_string(t), 0,
                                               "p", "m", "api"});
        hub.delta("t", "text", "x");
        hub.turn_ended(k, "completed");
      }
    });
  for (int i = 0; i < 200; ++i) {
    auto s = hub.subscribe(8, [] {});
    s->take();
    hub.unsubscribe(s);
  }
  stop = true;
  for (auto& t : pubs)
    t.join();
  BOOST_TEST(hub.running().empty());
  BOOST_TEST(!hub.active());
}

BOOST_AUTO_TEST_CASE(every_turn_of_the_runtime_is_published) {
  test::http_server provider;
  test::temp_dir home;
  options opts;
  opts.home = home.path();
  opts.agent.api_max_retries = 1;
  opts.code_execution.prestart_kernels = 0;
  std::string err;
  auto made = create_runtime(opts);
  BOOST_REQUIRE_MESSAGE(made, made.error);
  auto rt = std::move(*made);
  auto& hub = turn_events_of(*rt);
  auto sub = hub.subscribe(1000, [] {});
  // A turn without any callback (an embedding host that only wants the
  // answer) is still seen, tool events included.
  provider.script_chat(test::completion("", "read_file",
                                        R"({"path":"/nonexistent"})"));
  provider.script_chat(test::completion("done"));
  turn_call call;
  call.session_id = "ev-1";
  call.prompt = "read it";
  call.provider.provider = "custom";
  call.provider.base_url = provider.url("/v1");
  call.provider.model = "m";
  call.provider.api_key = "sk-test-0123456789";
  call.stream = false;
  auto out = rt->run_turn(call);
  BOOST_REQUIRE_MESSAGE(out.started, out.error);
  std::vector<turn_event_ptr> evs;
  for (int i = 0; i < 500; ++i) {
    for (auto& e : sub->take())
      evs.push_back(e);
    if (!evs.empty() && evs.back()->name == "turn_end")
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::string names;
  for (auto& e : evs)
    names += e->name + " ";
  BOOST_TEST(names == "turn_start tool_start tool_end turn_end ");
  BOOST_TEST(data_of(evs.back()).get_string("outcome", "") == "completed");
  BOOST_TEST(data_of(evs[1]).get_string("name", "") == "read_file");
  BOOST_TEST(hub.running().empty());
  // A turn that cannot start publishes nothing.
  turn_call bad = call;
  bad.prompt.clear();
  BOOST_TEST(!rt->run_turn(bad).error.empty());
  BOOST_TEST(sub->take().empty());
  hub.unsubscribe(sub);
}
