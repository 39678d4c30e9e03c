#define BOOST_TEST_MODULE ui_live
#include "tests/support/paths.hpp"
#include <boost/test/unit_test.hpp>

// The operator console's live view (docs/serve.md, "Operator console"):
// GET /ui/api/live (SSE), GET /ui/api/live/turns and POST
// /ui/api/live/{id}/interrupt against a real `mibyan serve` child process
// with the scripted provider behind it; real execute_code kernels.

#include <thread>

#include "tests/support/scripted_flood.hpp"
#include "tests/support/scripted_replies.hpp"
#include "tests/support/serve_fixture.hpp"
#include "tests/support/ui_client.hpp"
#include "tests/support/sse_watcher.hpp"

using namespace mibyan;
using namespace std::chrono;
using namespace mibyan::test::serving;
using mibyan::test::sse_frame;
using mibyan::test::sse_watcher;

namespace {

// /ui/ paths need a Host header that names the server (serve/ui_auth.hpp).
std::string ui_http(uint16_t port, const std::string& method,
                    const std::string& path) {
  return mibyan::test::ui::request(port, method, path);
}

// Scripts run without a person here (docs/approvals.md).
const std::string exec_config = "code_execution:\n"
                                "  sandbox: off\n"
                                "  prestart_kernels: 0\n"
                                "approvals:\n"
                                "  unattended_mode: approve\n";

// A chat request of session `sid` on its own connection; returns the
// whole response.
std::string chat_in(uint16_t port, const std::string& sid,
                    const std::string& text = "hi") {
  json::value body;
  body["model"] = "m";
  body["messages"] = json::value::make_array();
  json::value m;
  m["role"] = "user";
  m["content"] = text;
  body["messages"].push_back(m);
  return http(port, "POST", "/v1/chat/completions", body.dump(),
              "Content-Type: application/json\r\nX-Mibyan-Session: " + sid
                + "\r\n");
}

// A streamed provider answer: `pieces` as content deltas, then [DONE].
void script_stream(test::http_server& provider,
                   const std::vector<std::string>& pieces, int chunk_ms = 5) {
  json::value s;
  s["path"] = "/v1/chat/completions";
  s["status"] = 200;
  s["headers"]["Content-Type"] = "text/event-stream";
  auto arr = json::value::make_array();
  for (auto& p : pieces) {
    json::value delta;
    delta["content"] = p;
    json::value choice;
    choice["index"] = 0;
    choice["delta"] = delta;
    json::value chunk;
    chunk["choices"] = json::value::make_array();
    chunk["choices"].push_back(choice);
    arr.push_back("data: " + chunk.dump() + "\n\n");
  }
  arr.push_back("data: [DONE]\n\n");
  s["chunks"] = std::move(arr);
  s["chunk_ms"] = chunk_ms;
  provider.script(s.dump());
}

// The position of the first frame of `frames` with `event` (and `pred`);
// frames.size() when none.
template <class Pred>
size_t index_of(const std::vector<sse_frame>& frames, const std::string& event,
                Pred pred) {
  for (size_t i = 0; i < frames.size(); ++i)
    if (frames[i].event == event && pred(frames[i]))
      return i;
  return frames.size();
}

size_t index_of(const std::vector<sse_frame>& frames,
                const std::string& event) {
  return index_of(frames, event, [](const sse_frame&) { return true; });
}

// Polls GET /ui/api/live/turns until session `sid` is listed (true) or
// 30 s passed.
bool wait_running(uint16_t port, const std::string& sid) {
  for (int i = 0; i < 300; ++i) {
    auto r = ui_http(port, "GET", "/ui/api/live/turns");
    if (contains(body_of(r).dump(), "\"session_id\":\"" + sid + "\""))
      return true;
    std::this_thread::sleep_for(milliseconds{100});
  }
  return false;
}

// Checks that `w` saw a whole turn of `sid` with an execute_code call, in
// order: turn_start, tool_start, tool_end, text deltas, turn_end.
void check_turn_sequence(const sse_watcher& w, const std::string& sid) {
  auto fs = w.of(sid);
  std::string seen;
  for (auto& f : fs)
    seen += f.event + " ";
  BOOST_TEST_CONTEXT("events of " << sid << ": " << seen) {
    auto start = index_of(fs, "turn_start");
    auto tstart = index_of(fs, "tool_start", [](const sse_frame& f) {
      return f.data.get_string("name", "") == "execute_code";
    });
    auto tend = index_of(fs, "tool_end", [](const sse_frame& f) {
      return f.data.get_string("name", "") == "execute_code";
    });
    auto delta = index_of(fs, "delta", [](const sse_frame& f) {
      return f.data.get_string("kind", "") == "text";
    });
    auto end = index_of(fs, "turn_end");
    BOOST_REQUIRE_LT(end, fs.size());
    BOOST_TEST(start < tstart);
    BOOST_TEST(tstart < tend);
    BOOST_TEST(tend < delta);
    BOOST_TEST(delta < end);
    BOOST_TEST(fs[start].data.get_string("prompt", "") == "compute");
    BOOST_TEST(fs[start].data.get_string("model", "") == "m");
    BOOST_TEST(fs[start].data.get_int("started_at_ms", 0) > 0);
    BOOST_TEST(contains(fs[tstart].data.get_string("arguments", ""),
                        "6 * 7"));
    BOOST_TEST(contains(fs[tend].data.get_string("result", ""), "42"),
               fs[tend].raw);
    BOOST_TEST(fs[tend].data.get_string("id", "")
               == fs[tstart].data.get_string("id", "x"));
    std::string text;
    for (auto& f : fs)
      if (f.event == "delta" && f.data.get_string("kind", "") == "text")
        text += f.data.get_string("text", "");
    BOOST_TEST(text == "The answer is 42.");
    BOOST_TEST(fs[end].data.get_string("outcome", "") == "completed");
  }
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(ui_live, fixture)

BOOST_AUTO_TEST_CASE(two_watchers_see_a_turn_with_execute_code_in_order) {
  auto sp = start(exec_config);
  sse_watcher w1(sp->port), w2(sp->port);
  BOOST_REQUIRE(w1.wait_event("snapshot"));
  BOOST_REQUIRE(w2.wait_event("snapshot"));
  BOOST_TEST(contains(w1.head, "text/event-stream"));
  BOOST_TEST(w1.frames[0].data["turns"].is_array());
  provider.script_chat(test::completion("", "execute_code",
                                        R"j({"code":"print(6 * 7)"})j"));
  script_stream(provider, {"The ", "answer ", "is 42."});
  auto r = chat_in(sp->port, "live-1", "compute");
  BOOST_TEST_CONTEXT(r) { BOOST_REQUIRE_EQUAL(status_of(r), 200); }
  BOOST_REQUIRE_MESSAGE(w1.wait_event("turn_end", "live-1"), w1.raw);
  BOOST_REQUIRE_MESSAGE(w2.wait_event("turn_end", "live-1"), w2.raw);
  check_turn_sequence(w1, "live-1");
  check_turn_sequence(w2, "live-1");
  // Nothing is running now.
  auto turns = body_of(ui_http(sp->port, "GET", "/ui/api/live/turns"));
  BOOST_TEST(turns["data"].dump() == "[]");
  // A watcher that leaves unsubscribes; the server keeps serving.
  w1.close();
  w2.close();
  provider.script_chat(reply("again"));
  BOOST_TEST(status_of(chat_in(sp->port, "live-1", "again")) == 200);
  BOOST_CHECK_EQUAL(sp->stop(), 0);
}

BOOST_AUTO_TEST_CASE(a_watcher_that_never_reads_neither_slows_nor_blocks) {
  // A small per-watcher queue so that the stalled watcher lags soon.
  auto sp = start(exec_config + "server:\n  live_buffer_events: 16\n");
  // A fixed receive buffer (no autotuning) well below the flood, and not
  // below the loopback MSS (a window that small stalls TCP itself).
  sse_watcher stalled(sp->port, 256 * 1024);
  // The stalled watcher reads its head and snapshot, then stops reading.
  BOOST_REQUIRE(stalled.wait_event("snapshot"));
  sse_watcher reader(sp->port);
  BOOST_REQUIRE(reader.wait_event("snapshot"));
  // About 4 MB of deltas: far more than the socket buffers hold.
  provider.script(test::delta_flood(4000).dump());
  // The turn completes while the stalled watcher has read nothing more.
  std::string r;
  std::thread t([&] { r = chat_in(sp->port, "flood-1", "flood"); });
  // Meanwhile the reader keeps reading (it may lag too, on a busy
  // machine, but it sees the end).
  bool reader_end = reader.wait_event("turn_end", "flood-1", 120);
  t.join();
  BOOST_TEST_CONTEXT(r.substr(0, 300)) {
    BOOST_REQUIRE_EQUAL(status_of(r), 200);
  }
  BOOST_TEST(reader_end);
  // Now the stalled watcher reads: what it got, then a "lagged" marker.
  BOOST_REQUIRE_MESSAGE(stalled.wait_event("lagged"), stalled.raw.size());
  int64_t lost = 0;
  for (auto& f : stalled.frames)
    if (f.event == "lagged")
      lost += f.data.get_int("lost", 0);
  BOOST_TEST(lost > 0);
  // It stays subscribed: the next turn reaches it in full.
  provider.script_chat(reply("after"));
  BOOST_TEST(status_of(chat_in(sp->port, "flood-2", "after")) == 200);
  BOOST_TEST(stalled.wait_event("turn_end", "flood-2"),
             stalled.raw.substr(stalled.raw.size() > 300
                                  ? stalled.raw.size() - 300
                                  : 0)
               << "\nserve stderr:\n" << test::slurp(sp->err_path));
  BOOST_CHECK_EQUAL(sp->stop(), 0);
}

BOOST_AUTO_TEST_CASE(interrupt_stops_a_running_turn) {
  auto sp = start(exec_config);
  sse_watcher w(sp->port);
  BOOST_REQUIRE(w.wait_event("snapshot"));
  provider.script_chat(reply("too late"), 1, 20000);
  std::string r;
  std::thread t([&] { r = chat_in(sp->port, "stop-1", "wait"); });
  BOOST_REQUIRE(wait_running(sp->port, "stop-1"));
  // A new watcher's snapshot lists it.
  sse_watcher late(sp->port);
  BOOST_REQUIRE(late.wait_event("snapshot"));
  BOOST_TEST(contains(late.frames[0].raw, "\"session_id\":\"stop-1\""));
  BOOST_TEST(contains(late.frames[0].raw, "\"prompt\":\"wait\""));
  auto ir = ui_http(sp->port, "POST", "/ui/api/live/stop-1/interrupt");
  BOOST_TEST_CONTEXT(ir) {
    BOOST_CHECK_EQUAL(status_of(ir), 200);
    BOOST_TEST(body_of(ir).get_bool("interrupted", false));
  }
  t.join();
  check_error(r, 503, "turn_interrupted");
  BOOST_REQUIRE(w.wait_event("turn_end", "stop-1"));
  BOOST_TEST(w.of("stop-1").back().data.get_string("outcome", "")
             == "interrupted");
  // Not running any more: 404.
  check_error(ui_http(sp->port, "POST", "/ui/api/live/stop-1/interrupt"), 404,
              "turn_not_found");
  BOOST_CHECK_EQUAL(sp->stop(), 0);
}

BOOST_AUTO_TEST_CASE(an_idle_live_stream_gets_keep_alive_comments) {
  auto sp = start(exec_config + "server:\n  keepalive_s: 1\n");
  sse_watcher w(sp->port);
  BOOST_REQUIRE(w.wait_event("snapshot"));
  // No turn runs: a comment line keeps proxies busy.
  BOOST_TEST(w.wait_raw(": keep-alive\n\n"), w.raw);
  BOOST_CHECK_EQUAL(sp->stop(), 0);
}

BOOST_AUTO_TEST_CASE(bad_input_gets_clear_4xx) {
  auto sp = start(exec_config);
  auto p = sp->port;
  check_error(ui_http(p, "POST", "/ui/api/live/nobody/interrupt"), 404,
              "turn_not_found");
  check_error(ui_http(p, "GET", "/ui/api/live/nobody/interrupt"), 405,
              "method_not_allowed");
  check_error(ui_http(p, "POST", "/ui/api/live/bad%20id/interrupt"), 400,
              "bad_session_id");
  check_error(ui_http(p, "POST", "/ui/api/live/" + std::string(200, 'a')
                                + "/interrupt"),
              400, "bad_session_id");
  check_error(ui_http(p, "POST", "/ui/api/live"), 405, "method_not_allowed");
  check_error(ui_http(p, "POST", "/ui/api/live/turns"), 405,
              "method_not_allowed");
  check_error(ui_http(p, "GET", "/ui/api/live/x/y/z"), 404, "not_found");
  check_error(ui_http(p, "POST", "/ui/api/live/x/cancel"), 404, "not_found");
  check_error(ui_http(p, "GET", "/ui/api/livex"), 404, "not_found");
  check_error(ui_http(p, "DELETE", "/ui/api/cluster"), 405,
              "method_not_allowed");
  // Not a cluster member.
  auto c = ui_http(p, "GET", "/ui/api/cluster");
  BOOST_CHECK_EQUAL(status_of(c), 200);
  BOOST_TEST(body_of(c).dump() == R"({"enabled":false})");
  // The server is still fine.
  provider.script_chat(reply("fine"));
  BOOST_TEST(status_of(chat_in(p, "ok-1")) == 200);
  BOOST_CHECK_EQUAL(sp->stop(), 0);
}

// A notify_on_complete process of a kept session: its end is a
// "background" event on the live stream, and its exit status reaches the
// session's next turn (docs/agent_loop.md, "Background deliveries").
BOOST_AUTO_TEST_CASE(a_background_process_end_is_a_live_event_and_a_notice) {
  auto sp = start(exec_config);
  sse_watcher w(sp->port);
  BOOST_REQUIRE(w.wait_event("snapshot"));
  provider.script_chat(test::completion(
    "", "terminal",
    R"j({"command":"echo LIVE-NOTIFY; exit 4","background":true,"notify_on_complete":true})j"));
  provider.script_chat(reply("started"));
  auto r = chat_in(sp->port, "live-bg", "start it");
  BOOST_TEST_CONTEXT(r) { BOOST_REQUIRE_EQUAL(status_of(r), 200); }
  BOOST_REQUIRE_MESSAGE(w.wait_event("background", "live-bg"), w.raw);
  auto ev = w.of("live-bg");
  auto at = index_of(ev, "background");
  BOOST_REQUIRE_LT(at, ev.size());
  BOOST_TEST(ev[at].data.get_string("kind") == "process");
  BOOST_TEST(ev[at].data.get_string("status") == "exited");
  BOOST_TEST(contains(ev[at].data.get_string("headline"), "code 4"));
  provider.script_chat(reply("noted"));
  BOOST_TEST(status_of(chat_in(sp->port, "live-bg", "what happened?")) == 200);
  auto reqs = test::request_bodies(provider);
  BOOST_REQUIRE_EQUAL(reqs.size(), 3u);
  auto last = reqs[2]["messages"].dump();
  BOOST_TEST(contains(last, ": exited 4]"));
  BOOST_TEST(contains(last, "LIVE-NOTIFY"));
  BOOST_CHECK_EQUAL(sp->stop(), 0);
}

BOOST_AUTO_TEST_SUITE_END()
