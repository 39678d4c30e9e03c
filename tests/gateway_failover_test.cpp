// Several gateways over one store (docs/cluster.md, "Several gateways",
// "Failover"): real `mibyan node` gateways on loopback sharing one
// $MIBYAN_HOME (one LMDB store, the leases in it) and workers of their own.
// Turns of one session sent to different gateways run one at a time, in
// order, each with the whole history; a turn that arrives while another
// gateway runs the session is forwarded to it and runs after; kill -9 of
// the gateway holding a session mid-tool-call: the client goes on through
// the next address, the session is taken over, and the interrupted call is
// reported to the model, not run again. The ordering case runs once more
// with `storage.backend: postgres` (one throw-away PostgreSQL server,
// tests/support/pg_server.hpp; the password from MIBYAN_PG_PASSWORD).
// Waits are bounded polls.
#define BOOST_TEST_MODULE gateway_failover_test
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <future>

#include "agent/turn_result.hpp"
#include "storage/session_lease.hpp"
#include "tests/support/gateway_fixture.hpp"

using namespace mibyan;
using namespace mibyan::test;

// Nine turns of one session, round robin over three gateways with two
// workers: each model call sees the whole history, in order, and the store
// holds each prompt once, answered. Returns the (stopped) gateways.
std::vector<std::unique_ptr<node_process>> turns_stay_ordered(gateways& f) {
  auto& provider = f.provider;
  provider.script_chat(completion("ok"), 40);
  auto a = f.start_gateway("");
  auto b = f.start_gateway(a->address);
  auto c = f.start_gateway(a->address);
  auto w1 = f.start_worker(a->address);
  auto w2 = f.start_worker(a->address);
  std::vector<std::unique_ptr<cluster_client>> clients;
  for (auto* g : {a.get(), b.get(), c.get()})
    clients.push_back(f.connect(g->address));
  f.wait_members(*clients[0], 5);
  f.wait_members(*clients[2], 5);
  std::vector<std::string> prompts;
  for (int i = 0; i < 9; ++i) {
    prompts.push_back("prompt number " + std::to_string(i));
    check_ok(f.turn(*clients[i % 3], "spread", prompts.back()));
    // The holder releases the lease just after it answered; once it did,
    // the next gateway takes it (a new token) instead of forwarding it
    // there (the token check of the PostgreSQL case).
    if (f.store_opts.backend == "postgres")
      f.wait_released("spread");
    // A gateway that ran the session before reloads what the others wrote.
    f.check_last_request(prompts);
  }
  f.check_history("spread", prompts);
  for (auto* g : {a.get(), b.get(), c.get(), w1.get(), w2.get()})
    BOOST_CHECK_EQUAL(g->stop(), 0);
  std::vector<std::unique_ptr<node_process>> out;
  out.push_back(std::move(a));
  out.push_back(std::move(b));
  out.push_back(std::move(c));
  return out;
}

BOOST_FIXTURE_TEST_CASE(turns_spread_over_three_gateways_stay_ordered,
                        gateways) {
  turns_stay_ordered(*this);
}

BOOST_FIXTURE_TEST_CASE(turns_stay_ordered_over_postgres, pg_gateways) {
  if (!pg)
    return;
  auto gws = turns_stay_ordered(*this);
  // The gateways took the session's lease in PostgreSQL, and it changed
  // hands between them (a new token each time), with nothing missing.
  auto store = open_store();
  auto leases = open_session_leases(*store);
  BOOST_REQUIRE_MESSAGE(leases, leases.error);
  auto row = (*leases)->get(session_lease_name("spread"));
  BOOST_REQUIRE_MESSAGE(row, row.error);
  std::vector<std::string> ids;
  for (auto& g : gws) {
    ids.push_back(g->id);
    BOOST_CHECK_MESSAGE(!contains(g->err(), "unavailable"), g->err());
  }
  BOOST_CHECK_MESSAGE(std::find(ids.begin(), ids.end(), row->holder)
                        != ids.end(),
                      "lease holder " << row->holder);
  BOOST_CHECK_GE(row->token, 9u);
  // The gateways wrote to PostgreSQL, not to an LMDB store in the home.
  BOOST_CHECK(!std::filesystem::exists(session_store::default_dir(home)
                                       + "/data.mdb"));
}

// A turn sent to a second gateway while the first runs the session is
// forwarded to the lease holder and runs after the first.
void forwarded_turn_runs_after(gateways& f) {
  auto& provider = f.provider;
  // The first model answer is slow: the session's lease is held meanwhile.
  provider.script(R"({"path":"/v1/chat/completions","status":200,"body":)"
                  + json::value{completion("first answer")}.dump()
                  + R"(,"delay_ms":2500})");
  provider.script_chat(completion("second answer"), 5);
  auto a = f.start_gateway("");
  auto b = f.start_gateway(a->address);
  auto w = f.start_worker(a->address);
  auto ca = f.connect(a->address);
  auto cb = f.connect(b->address);
  f.wait_members(*ca, 3);
  f.wait_members(*cb, 3);
  auto first = std::async(std::launch::async, [&] {
    return f.turn(*ca, "fwd", "first prompt");
  });
  for (int i = 0; i < 300 && f.chat_requests().empty(); ++i)
    std::this_thread::sleep_for(milliseconds{20});
  BOOST_REQUIRE_MESSAGE(!f.chat_requests().empty(), "the first turn did not "
                                                  "reach the model");
  auto second = f.turn(*cb, "fwd", "second prompt");
  check_ok(second);
  auto one = first.get();
  check_ok(one);
  // The second turn ran after the first, with it in its history.
  auto reqs = f.chat_requests();
  BOOST_REQUIRE_EQUAL(reqs.size(), 2u);
  auto seen = gateways::user_texts(reqs[1]);
  std::vector<std::string> expect{"first prompt", "second prompt"};
  BOOST_CHECK_EQUAL_COLLECTIONS(seen.begin(), seen.end(), expect.begin(),
                                expect.end());
  auto h = f.history("fwd");
  BOOST_REQUIRE_EQUAL(h.size(), 4u);
  BOOST_CHECK_EQUAL(h[0].message.content, "first prompt");
  BOOST_CHECK_EQUAL(h[1].message.content, "first answer");
  BOOST_CHECK_EQUAL(h[2].message.content, "second prompt");
  BOOST_CHECK_EQUAL(h[3].message.content, "second answer");
  // B sent it to A, the holder (not waited): A's log says so.
  BOOST_CHECK_MESSAGE(contains(b->err(), "forwarded to its lease holder "
                                           + a->id),
                      b->err());
  for (auto* g : {a.get(), b.get(), w.get()})
    BOOST_CHECK_EQUAL(g->stop(), 0);
}


// kill -9 of the gateway holding a session while its tool call runs on a
// worker: the client goes on through the other gateway, the call is
// reported as interrupted by a gateway loss and ran once, and the turn's
// prompt is stored once (the client sent it again with the same key).
void kill_9_mid_call(gateways& f) {
  auto& provider = f.provider;
  auto marker = f.dir / "marker";
  auto args = json::value::make_object();
  args["command"] = "echo ran >> " + marker + "; sleep 30";
  provider.script_chat(completion("", "terminal", args.dump()));
  provider.script_chat(completion("recovered"), 5);
  auto a = f.start_gateway("");
  auto b = f.start_gateway(a->address);
  auto w = f.start_worker(a->address);
  {
    auto probe = f.connect(b->address);
    f.wait_members(*probe, 3);
  }
  // The client knows both gateways; A answers first.
  auto made = cluster_client::connect(a->address + "," + b->address,
                                      f.client_options());
  BOOST_REQUIRE_MESSAGE(made, made.error);
  auto client = std::move(*made);
  BOOST_CHECK_EQUAL(client->current_address(), a->address);
  auto pending = std::async(std::launch::async, [&] {
    return f.turn(*client, "crash", "run the command");
  });
  // The call runs on the worker: the tool call is persisted, no result.
  for (int i = 0; i < 600 && test::slurp(marker).empty(); ++i)
    std::this_thread::sleep_for(milliseconds{20});
  BOOST_REQUIRE_MESSAGE(!test::slurp(marker).empty(), "the call never ran");
  auto killed_at = steady_clock::now();
  a->stop(SIGKILL);
  auto out = pending.get();
  auto took = duration_cast<milliseconds>(steady_clock::now() - killed_at);
  BOOST_TEST_MESSAGE("kill -9 -> turn done on the other gateway: "
                     << took.count() << " ms");
  check_ok(out);
  BOOST_CHECK_EQUAL(client->current_address(), b->address);
  // The call ran once; its result says a gateway loss interrupted it.
  BOOST_CHECK_EQUAL(test::slurp(marker), "ran\n");
  auto h = f.history("crash");
  size_t interrupted = 0;
  for (auto& m : h)
    if (m.message.role == "tool" && m.message.tool_call_id == "call_1") {
      BOOST_CHECK_MESSAGE(contains(m.message.content, "gateway loss")
                            && contains(m.message.content, a->id),
                          m.message.content);
      ++interrupted;
    }
  BOOST_CHECK_EQUAL(interrupted, 1u);
  BOOST_REQUIRE(!h.empty());
  BOOST_CHECK_EQUAL(h.back().message.content, "recovered");
  // The client sent the turn again with its key: the prompt is stored once.
  size_t prompts = 0;
  for (auto& m : h)
    prompts += m.message.role == "user" ? 1 : 0;
  BOOST_CHECK_EQUAL(prompts, 1u);
  // And the model was told so in its next call.
  auto reqs = f.chat_requests();
  BOOST_REQUIRE_GE(reqs.size(), 2u);
  BOOST_CHECK(contains(reqs.back().dump(), "gateway loss"));
  BOOST_CHECK_EQUAL(b->stop(), 0);
  BOOST_CHECK_EQUAL(w->stop(), 0);
}


BOOST_FIXTURE_TEST_CASE(a_turn_at_another_gateway_is_forwarded_and_runs_after,
                        gateways) {
  forwarded_turn_runs_after(*this);
}

BOOST_FIXTURE_TEST_CASE(forwarded_turns_over_postgres, pg_gateways) {
  if (pg)
    forwarded_turn_runs_after(*this);
}

BOOST_FIXTURE_TEST_CASE(kill_9_of_the_holder_mid_call_is_reported_not_rerun,
                        gateways) {
  kill_9_mid_call(*this);
}

BOOST_FIXTURE_TEST_CASE(kill_9_of_the_holder_over_postgres, pg_gateways) {
  if (pg)
    kill_9_mid_call(*this);
}

BOOST_FIXTURE_TEST_CASE(clients_try_the_next_address, gateways) {
  auto a = start_gateway("");
  auto w = start_worker(a->address);
  auto probe = connect(a->address);
  wait_members(*probe, 2);
  // Nothing listens on the first address: the tool call goes to the second.
  auto dead = "127.0.0.1:" + std::to_string(free_port());
  auto o = cli_env();
  auto r = run_process({test::mibyan_binary(), "tool", "--connect",
                        dead + "," + a->address, "--session", "t1",
                        "terminal", R"({"command":"echo hi"})"},
                       o);
  BOOST_CHECK_EQUAL(r.exit_code, 0);
  BOOST_CHECK_MESSAGE(contains(r.out, "hi"), r.out << r.err);
  // No address answers: exit 1 naming them.
  auto none = run_process({test::mibyan_binary(), "tool", "--connect",
                           dead + "," + dead, "terminal",
                           R"({"command":"echo hi"})"},
                          o);
  BOOST_CHECK_EQUAL(none.exit_code, 1);
  BOOST_CHECK_MESSAGE(contains(none.err, "no cluster member answered"),
                      none.err);
  BOOST_CHECK_EQUAL(a->stop(), 0);
  BOOST_CHECK_EQUAL(w->stop(), 0);
}
