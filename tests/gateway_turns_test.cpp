// Turns over several gateways (docs/cluster.md, "Idempotent turns",
// "Several gateways over one store"), each case on both store backends
// (the shared LMDB home, and one throw-away PostgreSQL database; the
// postgres run says SKIPPED where the server cannot start and fails under
// MIBYAN_REQUIRE_TEST_DATA=1):
//   - kill -9 of the gateway after the turn's user message was stored: the
//     client sends the turn again (same key) to the next gateway, which
//     resumes it; the history holds the prompt once; the same turn sent a
//     third time is answered from the store without a model call;
//   - HTTP turns with an Idempotency-Key sent to two `serve --join`
//     gateways run once; a malformed key is refused;
//   - HTTP turns of one session spread over three `serve --join` gateways
//     with two workers stay ordered, nothing lost or duplicated;
//   - a streamed turn sent to a gateway that does not hold the session is
//     forwarded and streamed back delta by delta (the openai npm client,
//     tests/node/gateway_stream_client.mjs).
#define BOOST_TEST_MODULE gateway_turns_test
#include <boost/test/unit_test.hpp>

#include "tests/support/gateway_fixture.hpp"
#include "tests/support/process.hpp"

using namespace mibyan;
using namespace mibyan::test;

namespace {

size_t count_users(const std::vector<stored_message>& h,
                   const std::string& text) {
  size_t n = 0;
  for (auto& m : h)
    n += m.message.role == "user" && m.message.content == text ? 1 : 0;
  return n;
}

// kill -9 of gateway A once the model was asked (the prompt is stored
// before any model call); the client goes on through B with the same key.
void retried_after_kill_9(gateways& f) {
  f.provider.script_chat(completion("never heard"), 1, 120000);
  f.provider.script_chat(completion("answered once"), 5);
  auto a = f.start_gateway("");
  auto b = f.start_gateway(a->address);
  {
    auto probe = f.connect(b->address);
    f.wait_members(*probe, 2);
  }
  auto made = cluster_client::connect(a->address + "," + b->address,
                                      f.client_options());
  BOOST_REQUIRE_MESSAGE(made, made.error);
  auto client = std::move(*made);
  BOOST_CHECK_EQUAL(client->current_address(), a->address);
  turn_call call;
  call.session_id = "keyed";
  call.prompt = "say it once";
  call.turn_key = "k-1";
  auto pending = std::async(std::launch::async,
                            [&] { return client->run_turn(call); });
  for (int i = 0; i < 600 && f.chat_requests().empty(); ++i)
    std::this_thread::sleep_for(milliseconds{20});
  BOOST_REQUIRE_MESSAGE(!f.chat_requests().empty(),
                        "the turn never reached the model");
  a->stop(SIGKILL);
  auto out = pending.get();
  check_ok(out);
  BOOST_CHECK_EQUAL(client->current_address(), b->address);
  auto h = f.history("keyed");
  BOOST_CHECK_EQUAL(count_users(h, "say it once"), 1u);
  BOOST_REQUIRE_EQUAL(h.size(), 2u);
  BOOST_CHECK_EQUAL(h[0].key, "turn:k-1");
  BOOST_CHECK_EQUAL(h[1].message.content, "answered once");
  // B's model call saw the prompt once.
  auto reqs = f.chat_requests();
  BOOST_REQUIRE_EQUAL(reqs.size(), 2u);
  auto seen = gateways::user_texts(reqs[1]);
  BOOST_CHECK_EQUAL(seen.size(), 1u);
  BOOST_CHECK_MESSAGE(contains(b->err(), "resuming it"), b->err());
  // A client that did not hear the answer sends the turn once more: the
  // stored answer comes back, nothing runs, nothing is stored.
  auto again = client->run_turn(call);
  check_ok(again);
  BOOST_CHECK(again.replayed);
  BOOST_CHECK_EQUAL(again.final_response.value_or(""), "answered once");
  BOOST_CHECK_EQUAL(f.chat_requests().size(), 2u);
  BOOST_CHECK_EQUAL(f.history("keyed").size(), 2u);
  // A new key is a new turn.
  call.turn_key = "k-2";
  check_ok(client->run_turn(call));
  BOOST_CHECK_EQUAL(count_users(f.history("keyed"), "say it once"), 2u);
  BOOST_CHECK_EQUAL(b->stop(), 0);
}

// Two HTTP gateways; the same keyed request to both runs once.
void http_keys_run_once(gateways& f) {
  f.provider.script_chat(completion("the only answer"), 1);
  f.provider.script_chat(completion("second turn"), 5);
  auto a = f.start_gateway("");
  auto h1 = f.start_http_gateway(a->address);
  auto h2 = f.start_http_gateway(a->address);
  {
    auto probe = f.connect(a->address);
    f.wait_members(*probe, 3);
  }
  auto first = f.http_chat(h1->address, "web", "hello there", "req-77");
  BOOST_REQUIRE_MESSAGE(contains(first, "200 OK"), first);
  BOOST_CHECK_MESSAGE(contains(first, "the only answer"), first);
  // The load balancer retried it on the other gateway.
  auto second = f.http_chat(h2->address, "web", "hello there", "req-77");
  BOOST_REQUIRE_MESSAGE(contains(second, "200 OK"), second);
  BOOST_CHECK_MESSAGE(contains(second, "the only answer"), second);
  BOOST_CHECK_EQUAL(f.chat_requests().size(), 1u);
  auto h = f.history("web");
  BOOST_CHECK_EQUAL(count_users(h, "hello there"), 1u);
  BOOST_CHECK_EQUAL(h.size(), 2u);
  // Without a key the same text is a new turn.
  auto third = f.http_chat(h2->address, "web", "hello there");
  BOOST_CHECK_MESSAGE(contains(third, "second turn"), third);
  BOOST_CHECK_EQUAL(count_users(f.history("web"), "hello there"), 2u);
  // A malformed key is refused before anything runs.
  auto bad = f.http_chat(h1->address, "web", "x",
                         std::string(201, 'k'));
  BOOST_CHECK_MESSAGE(contains(bad, "400 Bad Request")
                        && contains(bad, "bad_idempotency_key"),
                      bad);
  BOOST_CHECK_EQUAL(f.chat_requests().size(), 2u);
  for (auto* g : {h1.get(), h2.get(), a.get()})
    BOOST_CHECK_EQUAL(g->stop(), 0);
}

// Nine HTTP turns of one session round robin over three `serve --join`
// gateways with two workers: each model call sees the whole history in
// order, and the store holds each prompt once, answered.
void http_turns_stay_ordered(gateways& f) {
  f.provider.script_chat(completion("ok"), 40);
  auto seed = f.start_gateway("");
  auto w1 = f.start_worker(seed->address);
  auto w2 = f.start_worker(seed->address);
  std::vector<std::unique_ptr<node_process>> http;
  for (int i = 0; i < 3; ++i)
    http.push_back(f.start_http_gateway(seed->address));
  {
    auto probe = f.connect(seed->address);
    f.wait_members(*probe, 6);
  }
  std::vector<std::string> prompts;
  for (int i = 0; i < 9; ++i) {
    prompts.push_back("web prompt " + std::to_string(i));
    auto r = f.http_chat(http[i % 3]->address, "spread-http",
                         prompts.back());
    BOOST_REQUIRE_MESSAGE(contains(r, "200 OK"), r);
    f.check_last_request(prompts);
  }
  f.check_history("spread-http", prompts);
  for (auto& g : http)
    BOOST_CHECK_EQUAL(g->stop(), 0);
  for (auto* g : {seed.get(), w1.get(), w2.get()})
    BOOST_CHECK_EQUAL(g->stop(), 0);
}

// The provider's reply for the forwarded turn: SSE chunks "Str", "eam",
// "ed!" with pauses, so each is a delta of its own.
std::string streamed_script() {
  auto chunks = json::value::make_array();
  for (auto piece : {"Str", "eam", "ed!"}) {
    json::value delta;
    delta["content"] = piece;
    json::value choice;
    choice["index"] = 0;
    choice["delta"] = std::move(delta);
    choice["finish_reason"] = json::value{};
    json::value chunk;
    chunk["id"] = "p1";
    chunk["object"] = "chat.completion.chunk";
    chunk["model"] = "m";
    chunk["choices"] = json::value::make_array();
    chunk["choices"].push_back(std::move(choice));
    chunks.push_back("data: " + chunk.dump() + "\n\n");
  }
  json::value stop;
  stop["index"] = 0;
  stop["delta"] = json::value::make_object();
  stop["finish_reason"] = "stop";
  json::value last;
  last["id"] = "p1";
  last["object"] = "chat.completion.chunk";
  last["model"] = "m";
  last["choices"] = json::value::make_array();
  last["choices"].push_back(std::move(stop));
  chunks.push_back("data: " + last.dump() + "\n\n");
  chunks.push_back("data: [DONE]\n\n");
  json::value spec;
  spec["path"] = "/v1/chat/completions";
  spec["status"] = 200;
  spec["headers"]["Content-Type"] = "text/event-stream";
  spec["chunks"] = std::move(chunks);
  spec["chunk_ms"] = 150;
  return spec.dump();
}

// A streamed turn at gateway h2 while h1 runs the session (holds its
// lease): forwarded to h1, its deltas come back through h2 one by one.
void forwarded_stream(gateways& f) {
  auto dir = test::test_source_dir() + "/node";
  BOOST_REQUIRE_MESSAGE(
    std::filesystem::exists(dir + "/node_modules/openai/package.json"),
    "the openai npm client is not installed: run "
    "scripts/install-test-deps.sh (needs npm registry access)");
  f.provider.script(R"({"path":"/v1/chat/completions","status":200,"body":)"
                    + json::value{completion("first answer")}.dump()
                    + R"(,"delay_ms":2500})");
  f.provider.script(streamed_script());
  auto seed = f.start_gateway("");
  auto h1 = f.start_http_gateway(seed->address);
  auto h2 = f.start_http_gateway(seed->address);
  {
    auto probe = f.connect(seed->address);
    f.wait_members(*probe, 3);
  }
  auto first = std::async(std::launch::async, [&] {
    return f.http_chat(h1->address, "streamed", "first prompt");
  });
  for (int i = 0; i < 600 && f.chat_requests().empty(); ++i)
    std::this_thread::sleep_for(milliseconds{20});
  BOOST_REQUIRE_MESSAGE(!f.chat_requests().empty(),
                        "the first turn never reached the model");
  test::process_options o;
  o.env["SERVE_URL"] = "http://" + h2->address;
  o.env["SESSION"] = "streamed";
  o.cwd = dir;
  o.timeout_seconds = 120;
  auto r = test::run_process({"node", dir + "/gateway_stream_client.mjs",
                              "forwarded"},
                             o);
  BOOST_CHECK_MESSAGE(r.exit_code == 0 && contains(r.out, "OK forwarded"),
                      "node forwarded failed (" << r.exit_code << "): "
                                                << r.out << r.err
                                                << "\nh2:\n" << h2->err() << "\nh1:\n" << h1->err());
  auto one = first.get();
  BOOST_CHECK_MESSAGE(contains(one, "first answer"), one);
  BOOST_CHECK_MESSAGE(contains(h2->err(), "forwarded to its lease holder"),
                      h2->err());
  auto h = f.history("streamed");
  BOOST_REQUIRE_EQUAL(h.size(), 4u);
  BOOST_CHECK_EQUAL(h[2].message.content, "stream through the holder");
  BOOST_CHECK_EQUAL(h[3].message.content, "Streamed!");
  for (auto* g : {h1.get(), h2.get(), seed.get()})
    BOOST_CHECK_EQUAL(g->stop(), 0);
}

} // namespace

BOOST_FIXTURE_TEST_CASE(a_streamed_turn_is_streamed_through_a_forwarding_gateway,
                        gateways) {
  forwarded_stream(*this);
}

BOOST_FIXTURE_TEST_CASE(a_turn_sent_again_after_kill_9_is_stored_once,
                        gateways) {
  retried_after_kill_9(*this);
}

BOOST_FIXTURE_TEST_CASE(a_turn_sent_again_after_kill_9_over_postgres,
                        pg_gateways) {
  if (pg)
    retried_after_kill_9(*this);
}

BOOST_FIXTURE_TEST_CASE(http_turns_with_a_key_run_once, gateways) {
  http_keys_run_once(*this);
}

BOOST_FIXTURE_TEST_CASE(http_turns_with_a_key_run_once_over_postgres,
                        pg_gateways) {
  if (pg)
    http_keys_run_once(*this);
}

BOOST_FIXTURE_TEST_CASE(http_turns_over_three_gateways_stay_ordered,
                        gateways) {
  http_turns_stay_ordered(*this);
}

BOOST_FIXTURE_TEST_CASE(http_turns_over_three_gateways_over_postgres,
                        pg_gateways) {
  if (pg)
    http_turns_stay_ordered(*this);
}
