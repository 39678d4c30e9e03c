// The conversation's model calls in simulated time
// (tests/support/sim_fixture.hpp): the provider connection actor
// (actors/provider.hpp) over a scripted transport that never answers
// unless told to, and a conversation (actors/conversation.hpp) whose turn
// runs on it. A silent stream is aborted after provider.stream_idle_timeout
// of silence (counted from the last byte, on the injected clock), retried
// after the back-off (2 s, then 4 s), and the turn fails with the
// provider's error once the attempts are spent; an HTTP-date Retry-After
// counts from the injected wall clock; an interrupt ends the turn at once.
#define BOOST_TEST_MODULE sim_conversation
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <ctime>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "actors/conversation.hpp"
#include "actors/provider.hpp"
#include "actors/services.hpp"
#include "agent/turn_result.hpp"
#include "base/blocking_pool.hpp"
#include "base/http_client.hpp"
#include "base/json.hpp"
#include "providers/provider_profile.hpp"
#include "storage/session_store.hpp"

#include "tests/support/sim_fixture.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mibyan;
using namespace std::chrono;

namespace {

// An HTTP client whose transfers the test answers. Callbacks run on the
// test's thread (inside `cancel` or the test's own calls), so every message
// to the provider is sent from the thread that runs the scheduler.
class scripted_http final : public http_client {
public:
  struct transfer {
    http_request req;
    http_callbacks cb;
    http_request_id id = 0;
    bool cancelled = false;
    bool ended = false;
  };

  std::vector<transfer> transfers;

  http_request_id submit(http_request req, http_callbacks cb) override {
    transfer t;
    t.req = std::move(req);
    t.cb = std::move(cb);
    t.id = ++next_;
    transfers.push_back(std::move(t));
    return next_;
  }

  void cancel(http_request_id id) override {
    for (auto& t : transfers)
      if (t.id == id && !t.ended) {
        t.cancelled = true;
        http_response_summary s;
        s.id = id;
        s.cancelled = true;
        s.error = "cancelled";
        end(t, s);
      }
  }

  // Answers transfer `i` with `status`, headers and a whole body.
  void respond(size_t i, long status, const http_headers& headers,
               const std::string& body) {
    auto& t = transfers.at(i);
    if (t.cb.on_headers)
      t.cb.on_headers(status, headers);
    if (!body.empty() && t.cb.on_data)
      t.cb.on_data(body);
    http_response_summary s;
    s.id = t.id;
    s.status = status;
    end(t, s);
  }

  // Sends only the headers and one body chunk of a stream (it stays open).
  void trickle(size_t i, const std::string& chunk) {
    auto& t = transfers.at(i);
    if (t.cb.on_headers && !headers_sent_[t.id]) {
      headers_sent_[t.id] = true;
      t.cb.on_headers(200, {{"content-type", "text/event-stream"}});
    }
    if (t.cb.on_data)
      t.cb.on_data(chunk);
  }

  size_t cancelled_count() const {
    size_t n = 0;
    for (auto& t : transfers)
      n += t.cancelled ? 1 : 0;
    return n;
  }

private:
  void end(transfer& t, const http_response_summary& s) {
    t.ended = true;
    if (t.cb.on_done)
      t.cb.on_done(s);
  }

  http_request_id next_ = 0;
  std::map<http_request_id, bool> headers_sent_;
};

// The session writer's protocol, answered at once (the store's own writer
// commits on its own thread, outside the simulated system).
session_writer_actor::behavior_type fake_writer() {
  auto next = std::make_shared<uint64_t>(0);
  return {
    [](create_atom, session_meta& m) { return m.id; },
    [next](append_atom, message_append&) { return ++*next; },
    [](usage_atom, usage_update&) { return true; },
    [](end_atom, std::string&, std::string&) { return true; },
  };
}

// An HTTP date (RFC 9110) `ms` milliseconds after the epoch.
std::string http_date(int64_t ms) {
  std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  return buf;
}

struct fixture : mibyan::test::sim_fixture {
  mibyan::test::temp_dir home;
  std::shared_ptr<scripted_http> http = std::make_shared<scripted_http>();
  provider_actor provider;

  fixture() {
    options opts;
    provider_settings s;
    s.main = resolve_endpoint({"custom", "http://127.0.0.1:9/v1",
                               "test-model", "sk-test-0123456789"},
                              opts);
    BOOST_REQUIRE_MESSAGE(s.main.ok(), s.main.error);
    s.retry.max_attempts = 3;
    s.random = [] { return 0.0; }; // no jitter: waits of 2 s, then 4 s
    s.stream_idle_timeout = seconds(10);
    s.clock = clock;
    provider = spawn_provider(sys, http, std::move(s));
    run_all();
  }

  ~fixture() {
    caf::anon_send_exit(provider, caf::exit_reason::user_shutdown);
    run_all();
  }

  static chat_request request(const std::string& id) {
    chat_request req;
    req.request_id = id;
    req.stream = true;
    chat_message m;
    m.role = "user";
    m.content = "Say hello.";
    req.messages.push_back(std::move(m));
    return req;
  }

  size_t attempts() const { return http->transfers.size(); }
};

} // namespace

BOOST_FIXTURE_TEST_CASE(silent_stream_is_retried_with_backoff_then_fails,
                        fixture) {
  auto box = ask<chat_response>(provider, complete_atom_v, request("r1"));
  BOOST_REQUIRE_EQUAL(attempts(), 1u);
  // Attempt 1 is aborted after 10 s of silence, not before.
  advance(milliseconds(9900));
  BOOST_CHECK_EQUAL(http->cancelled_count(), 0u);
  advance(milliseconds(100));
  BOOST_CHECK_EQUAL(http->cancelled_count(), 1u);
  // Back-off 2 s before attempt 2.
  advance(milliseconds(1900));
  BOOST_CHECK_EQUAL(attempts(), 1u);
  advance(milliseconds(100));
  BOOST_CHECK_EQUAL(attempts(), 2u);
  // Attempt 2 stalls too (at 22 s); back-off 4 s before attempt 3.
  advance(seconds(10));
  BOOST_CHECK_EQUAL(http->cancelled_count(), 2u);
  advance(milliseconds(3900));
  BOOST_CHECK_EQUAL(attempts(), 2u);
  advance(milliseconds(100));
  BOOST_CHECK_EQUAL(attempts(), 3u);
  BOOST_CHECK(!box->done());
  // Attempt 3 stalls at 36 s: the attempts are spent, the call fails.
  advance(milliseconds(9900));
  BOOST_CHECK(!box->done());
  advance(milliseconds(100));
  BOOST_REQUIRE(box->value);
  BOOST_CHECK_EQUAL(box->value->attempts, 3);
  BOOST_CHECK_MESSAGE(box->value->error.find("stream stalled")
                        != std::string::npos,
                      box->value->error);
  BOOST_CHECK(box->value->retryable);
  // Nothing runs after the call ended.
  advance(seconds(60));
  BOOST_CHECK_EQUAL(attempts(), 3u);
}

BOOST_FIXTURE_TEST_CASE(stream_silence_counts_from_the_last_byte, fixture) {
  auto box = ask<chat_response>(provider, complete_atom_v, request("r1"));
  advance(seconds(6));
  http->trickle(0, ": keep-alive\n\n");
  run_all();
  // The timer set at the start fires at 10 s, finds 4 s of silence and
  // waits the rest: the stream is aborted 10 s after the byte, at 16 s.
  advance(milliseconds(9900));
  BOOST_CHECK_EQUAL(http->cancelled_count(), 0u);
  advance(milliseconds(100));
  BOOST_CHECK_EQUAL(http->cancelled_count(), 1u);
  BOOST_CHECK(!box->done());
}

BOOST_FIXTURE_TEST_CASE(retry_after_date_counts_from_the_injected_wall_clock,
                        fixture) {
  auto box = ask<chat_response>(provider, complete_atom_v, request("r1"));
  // 429 with a date 7 s after the injected wall clock's now (a date in
  // 2023: on the machine's clock it lies in the past and means "now").
  http->respond(0, 429,
                {{"retry-after", http_date(clock->wall_ms() + 7000)},
                 {"content-type", "application/json"}},
                R"({"error":{"message":"slow down"}})");
  run_all();
  advance(milliseconds(6900));
  BOOST_CHECK_EQUAL(attempts(), 1u);
  advance(milliseconds(100));
  BOOST_CHECK_EQUAL(attempts(), 2u);
  // The second attempt answers: the call succeeds.
  http->respond(1, 200, {{"content-type", "text/event-stream"}},
                "data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\","
                "\"model\":\"test-model\",\"choices\":[{\"index\":0,"
                "\"delta\":{\"role\":\"assistant\",\"content\":\"hello\"},"
                "\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n");
  run_all();
  BOOST_REQUIRE(box->value);
  BOOST_CHECK_MESSAGE(box->value->error.empty(), box->value->error);
  BOOST_CHECK_EQUAL(box->value->attempts, 2);
}

BOOST_FIXTURE_TEST_CASE(cancel_stops_the_call_and_its_timers, fixture) {
  auto box = ask<chat_response>(provider, complete_atom_v, request("r1"));
  advance(seconds(3));
  self->send(provider, cancel_atom_v, std::string{"r1"});
  run_all();
  BOOST_REQUIRE(box->error);
  BOOST_CHECK_EQUAL(http->cancelled_count(), 1u);
  advance(seconds(60));
  BOOST_CHECK_EQUAL(attempts(), 1u);
}

// -- the conversation on top ------------------------------------------------

namespace {

struct conversation_fixture : fixture {
  std::shared_ptr<session_store> store;
  conversation_actor conv;

  conversation_fixture() {
    session_store_options so;
    so.dir = session_store::default_dir(home.path());
    so.now_ms = runtime_clock::wall_fn(clock);
    auto opened = session_store::open(so);
    BOOST_REQUIRE_MESSAGE(opened, opened.error);
    store = std::move(*opened);
    new_session ns;
    ns.id = "s1";
    ns.cwd = home.path();
    BOOST_REQUIRE(store->create_session(ns));
    auto svc = std::make_shared<runtime_services>();
    svc->cfg.home = home.path();
    svc->default_cwd = home.path();
    svc->pool = std::make_unique<blocking_pool>(1);
    svc->clock = clock;
    conversation_deps deps;
    deps.svc = svc;
    deps.writer = sys.spawn(fake_writer);
    deps.store = store;
    deps.session_id = "s1";
    deps.frozen_prompt = "You are terse.";
    conv = spawn_conversation(sys, std::move(deps));
    run_all();
  }

  ~conversation_fixture() {
    caf::anon_send_exit(conv, caf::exit_reason::user_shutdown);
    run_all();
  }

  std::shared_ptr<mibyan::test::reply_box<turn_result>> turn() {
    turn_request req;
    req.text = "Say hello.";
    req.stream = true;
    req.provider = caf::actor_cast<caf::actor>(provider);
    req.endpoint.model = "test-model";
    req.endpoint.provider = "custom";
    return ask<turn_result>(conv, turn_atom_v, req);
  }

  static turn_result result(const mibyan::test::reply_box<turn_result>& box) {
    BOOST_REQUIRE(box.value);
    return *box.value;
  }
};

} // namespace

BOOST_FIXTURE_TEST_CASE(turn_fails_when_the_provider_never_answers,
                        conversation_fixture) {
  auto box = turn();
  BOOST_REQUIRE_EQUAL(attempts(), 1u);
  // Three silent attempts: 10 s + 2 s + 10 s + 4 s + 10 s.
  advance(milliseconds(35'900));
  BOOST_CHECK(!box->done());
  BOOST_CHECK_EQUAL(attempts(), 3u);
  advance(milliseconds(100));
  auto r = result(*box);
  BOOST_CHECK(r.failed);
  BOOST_CHECK_EQUAL(to_string(r.exit), std::string{"provider_error"});
  BOOST_CHECK_MESSAGE(r.error.find("stream stalled") != std::string::npos,
                      turn_result_json(r).dump());
  // The conversation takes the next turn.
  auto next = turn();
  BOOST_CHECK_EQUAL(attempts(), 4u);
  BOOST_CHECK(!next->done());
}

BOOST_FIXTURE_TEST_CASE(interrupt_during_backoff_ends_the_turn,
                        conversation_fixture) {
  auto box = turn();
  advance(seconds(11)); // attempt 1 stalled; waiting to retry
  BOOST_CHECK_EQUAL(attempts(), 1u);
  self->send(conv, interrupt_atom_v, std::string{"user stopped it"});
  run_all();
  auto r = result(*box);
  BOOST_CHECK(r.interrupted);
  // The provider call was cancelled: no retry follows.
  advance(seconds(30));
  BOOST_CHECK_EQUAL(attempts(), 1u);
}
