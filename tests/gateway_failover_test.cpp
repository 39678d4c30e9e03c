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
#include "storage/session_store.hpp"
#include "tests/support/cluster_fixture.hpp"
#include "tests/support/http_server.hpp"
#include "tests/support/pg_server.hpp"
#include "tests/support/scripted_replies.hpp"

using namespace mibyan;
using namespace mibyan::test;

namespace {

struct gateways : cluster_fixture {
  http_server provider;
  std::string home;
  // Set for the gateways' processes besides the fixture's own.
  std::map<std::string, std::string> gateway_env;
  // How the test reads the shared store.
  session_store_options store_opts;

  gateways() {
    home = dir / "shared";
    std::filesystem::create_directories(home);
    dir.write("shared/config.yaml", config());
    store_opts.dir = session_store::default_dir(home);
    store_opts.read_only = true;
  }

  // A gateway (role "gateway") on the shared home.
  std::unique_ptr<node_process> start_gateway(const std::string& join) {
    auto n = std::make_unique<node_process>();
    auto name = "gw" + std::to_string(++counter);
    n->workdir = dir / (name + "-work");
    std::filesystem::create_directories(n->workdir);
    n->err_path = dir / (name + ".err");
    std::vector<std::string> args{test::mibyan_binary(), "node", "--listen",
                                  "127.0.0.1:0", "--role", "gateway",
                                  "--workdir", n->workdir, "--provider",
                                  "custom", "--base-url",
                                  provider.url("/v1"), "--model", "m"};
    if (!join.empty()) {
      args.push_back("--join");
      args.push_back(join);
    }
    auto env = gateway_env;
    env["CUSTOM_API_KEY"] = "sk-test-1234";
    env["MIBYAN_LOG_LEVEL"] = "info";
    auto line = launch(*n, args, home, env);
    BOOST_REQUIRE_MESSAGE(n->pid != -1 && contains(line, " listening on "),
                          "gateway did not start: " << line << " "
                                                    << n->err());
    auto rest = line.substr(std::string{"mibyan node "}.size());
    n->id = rest.substr(0, rest.find(' '));
    n->address = rest.substr(rest.rfind(' ') + 1);
    return n;
  }

  std::unique_ptr<node_process> start_worker(const std::string& join) {
    return start({"--role", "worker", "--join", join});
  }

  std::unique_ptr<session_store> open_store() {
    auto st = open_session_store(store_opts);
    BOOST_REQUIRE_MESSAGE(st, st.error);
    return std::move(*st);
  }

  std::vector<stored_message> history(const std::string& sid) {
    auto store = open_store();
    auto msgs = store->load_messages(sid);
    BOOST_REQUIRE_MESSAGE(msgs, msgs.error);
    return *msgs;
  }

  turn_result turn(cluster_client& c, const std::string& sid,
                    const std::string& prompt) {
    turn_call call;
    call.session_id = sid;
    call.prompt = prompt;
    return c.run_turn(call);
  }

  // The user messages of the chat request `body`, in order.
  static std::vector<std::string> user_texts(const json::value& body) {
    std::vector<std::string> out;
    auto msgs = body.find("messages");
    if (msgs == nullptr || !msgs->is_array())
      return out;
    for (auto& m : msgs->as_array())
      if (m.get_string("role", "") == "user")
        out.push_back(m.get_string("content", ""));
    return out;
  }

  std::vector<json::value> chat_requests() {
    std::vector<json::value> out;
    for (auto& b : request_bodies(provider))
      if (b.find("messages") != nullptr)
        out.push_back(b);
    return out;
  }
};

// A loopback port nothing listens on (bound, read, closed).
int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  BOOST_REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
  socklen_t len = sizeof sa;
  BOOST_REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len)
                == 0);
  ::close(fd);
  return ntohs(sa.sin_port);
}

void check_ok(const turn_result& o) {
  BOOST_REQUIRE_MESSAGE(o.started, "turn failed: " << o.error);
  BOOST_REQUIRE_MESSAGE(o.completed, "turn not completed: "
                                       << turn_result_json(o).dump());
}

// The gateways' store on a throw-away PostgreSQL server: config.yaml
// names the database over TCP without a password, which the gateways take
// from MIBYAN_PG_PASSWORD. `pg` stays null (the case is skipped) where the
// server cannot start.
struct pg_gateways : gateways {
  std::unique_ptr<pg_server> pg;

  pg_gateways() {
    std::string why;
    pg = pg_server::start(why);
    if (!pg) {
      const char* req = std::getenv("MIBYAN_REQUIRE_TEST_DATA");
      BOOST_REQUIRE_MESSAGE(req == nullptr || std::string{req} != "1",
                            "PostgreSQL cannot start: "
                              << why << " (MIBYAN_REQUIRE_TEST_DATA=1)");
      std::cerr << "SKIPPED (postgres): " << why << "\n";
      return;
    }
    auto db = pg->fresh_database("gw");
    dir.write("shared/config.yaml",
              config("storage:\n"
                     "  backend: postgres\n"
                     "  postgres:\n"
                     "    url: \""
                     + pg->tcp_url(db)
                     + "\"\n"
                       "    pool_size: 2\n"
                       "  auto_migrate: true\n"));
    gateway_env["MIBYAN_PG_PASSWORD"] = pg_server::password();
    store_opts = session_store_options{};
    store_opts.backend = "postgres";
    store_opts.postgres_url = pg->url(db);
  }
};

} // namespace

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
    // A gateway that ran the session before reloads what the others wrote.
    auto reqs = f.chat_requests();
    BOOST_REQUIRE(!reqs.empty());
    auto seen = gateways::user_texts(reqs.back());
    std::vector<std::string> expect(prompts.begin(), prompts.end());
    BOOST_CHECK_EQUAL_COLLECTIONS(seen.begin(), seen.end(), expect.begin(),
                                  expect.end());
  }
  auto h = f.history("spread");
  std::vector<std::string> users;
  for (size_t i = 0; i < h.size(); ++i)
    if (h[i].message.role == "user") {
      users.push_back(h[i].message.content);
      BOOST_REQUIRE(i + 1 < h.size());
      BOOST_CHECK_EQUAL(h[i + 1].message.role, "assistant");
    }
  BOOST_CHECK_EQUAL_COLLECTIONS(users.begin(), users.end(), prompts.begin(),
                                prompts.end());
  BOOST_CHECK_EQUAL(h.size(), 18u);
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

BOOST_FIXTURE_TEST_CASE(a_turn_at_another_gateway_is_forwarded_and_runs_after,
                        gateways) {
  // The first model answer is slow: the session's lease is held meanwhile.
  provider.script(R"({"path":"/v1/chat/completions","status":200,"body":)"
                  + json::value{completion("first answer")}.dump()
                  + R"(,"delay_ms":2500})");
  provider.script_chat(completion("second answer"), 5);
  auto a = start_gateway("");
  auto b = start_gateway(a->address);
  auto w = start_worker(a->address);
  auto ca = connect(a->address);
  auto cb = connect(b->address);
  wait_members(*ca, 3);
  wait_members(*cb, 3);
  auto first = std::async(std::launch::async, [&] {
    return turn(*ca, "fwd", "first prompt");
  });
  for (int i = 0; i < 300 && chat_requests().empty(); ++i)
    std::this_thread::sleep_for(milliseconds{20});
  BOOST_REQUIRE_MESSAGE(!chat_requests().empty(), "the first turn did not "
                                                  "reach the model");
  auto second = turn(*cb, "fwd", "second prompt");
  check_ok(second);
  auto one = first.get();
  check_ok(one);
  // The second turn ran after the first, with it in its history.
  auto reqs = chat_requests();
  BOOST_REQUIRE_EQUAL(reqs.size(), 2u);
  auto seen = user_texts(reqs[1]);
  std::vector<std::string> expect{"first prompt", "second prompt"};
  BOOST_CHECK_EQUAL_COLLECTIONS(seen.begin(), seen.end(), expect.begin(),
                                expect.end());
  auto h = history("fwd");
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

BOOST_FIXTURE_TEST_CASE(kill_9_of_the_holder_mid_call_is_reported_not_rerun,
                        gateways) {
  auto marker = dir / "marker";
  auto args = json::value::make_object();
  args["command"] = "echo ran >> " + marker + "; sleep 30";
  provider.script_chat(completion("", "terminal", args.dump()));
  provider.script_chat(completion("recovered"), 5);
  auto a = start_gateway("");
  auto b = start_gateway(a->address);
  auto w = start_worker(a->address);
  {
    auto probe = connect(b->address);
    wait_members(*probe, 3);
  }
  // The client knows both gateways; A answers first.
  std::string err;
  auto client = cluster_client::connect(a->address + "," + b->address,
                                        client_options(), &err);
  BOOST_REQUIRE_MESSAGE(client, err);
  BOOST_CHECK_EQUAL(client->current_address(), a->address);
  auto pending = std::async(std::launch::async, [&] {
    return turn(*client, "crash", "run the command");
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
  auto h = history("crash");
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
  // And the model was told so in its next call.
  auto reqs = chat_requests();
  BOOST_REQUIRE_GE(reqs.size(), 2u);
  BOOST_CHECK(contains(reqs.back().dump(), "gateway loss"));
  BOOST_CHECK_EQUAL(b->stop(), 0);
  BOOST_CHECK_EQUAL(w->stop(), 0);
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
