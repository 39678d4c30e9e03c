#define BOOST_TEST_MODULE cluster
#include "tests/support/paths.hpp"
#include <boost/test/unit_test.hpp>

// `mibyan node` clusters of real processes on loopback (docs/cluster.md):
// a gateway and two workers with their own workdirs, placement, a script's
// tool calls on its worker, a model turn through the gateway, a worker
// killed mid-cell, drain, refusals (key, protocol, bind), TLS, a bad peer
// and `mibyan serve --join` (an HTTP gateway). Waits are bounded polls; nothing asserts a time.

#include <algorithm>
#include <arpa/inet.h>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <functional>
#include <future>
#include <tuple>
#include <map>
#include <memory>
#include <netinet/in.h>
#include <poll.h>
#include <string>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "caf/all.hpp"
#include "caf/io/all.hpp"

#include "base/json.hpp"
#include "messages/type_ids.hpp"
#include "cluster/client.hpp"
#include "runtime/runtime_impl.hpp"
#include "tests/support/http_server.hpp"
#include "tests/support/process.hpp"
#include "tests/support/scripted_replies.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wait_until.hpp"

using namespace mibyan;
using namespace std::chrono;

#include "tests/support/cluster_fixture.hpp"
#include "tests/support/loopback.hpp"

using namespace mibyan::test;

namespace {

// A cell that creates `marker` in its kernel's working directory (the
// node's workdir), then sleeps `seconds`: the test waits for the marker
// instead of guessing when the cell started.
std::string marked_cell(const std::string& marker, const std::string& seconds) {
  return code_args("import time\nopen('" + marker + "', 'w').close()\n"
                   "time.sleep(" + seconds + ")\nprint('finished')");
}

// Waits until the cell of marked_cell created `marker` in `workdir`.
bool cell_started(const std::string& workdir, const std::string& marker) {
  return wait_until([&] {
    return std::filesystem::exists(workdir + "/" + marker);
  }, seconds{60});
}

const std::string pwd_script =
  "from mibyan_tools import terminal\nprint('PWD=' + terminal('pwd')['output'].strip())";

} // namespace

BOOST_FIXTURE_TEST_SUITE(cluster, cluster_fixture)

BOOST_AUTO_TEST_CASE(placement_is_spread_sticky_and_runs_on_the_worker) {
  auto gw = start({"--role", "gateway"});
  auto w1 = start({"--role", "worker", "--join", gw->address});
  auto w2 = start({"--role", "worker", "--join", w1->address});
  auto c = connect(gw->address);
  wait_members(*c, 3);
  std::map<std::string, std::string> placed; // session -> node
  std::map<std::string, int> per_node;
  for (int i = 0; i < 40 && per_node.size() < 2; ++i) {
    auto sid = "s" + std::to_string(i);
    auto r = call(*c, sid, "terminal", R"({"command":"pwd"})");
    auto node = r.get_string("node", "");
    BOOST_REQUIRE_MESSAGE(node == w1->id || node == w2->id, r.dump());
    auto& w = node == w1->id ? *w1 : *w2;
    BOOST_CHECK_MESSAGE(contains(r.get_string("output", ""), w.workdir),
                        r.dump());
    placed[sid] = node;
    ++per_node[node];
  }
  BOOST_CHECK_EQUAL(per_node.size(), 2u);
  // Sticky: every later call of a session lands where it was placed, and
  // a script's own tool calls run on that worker.
  for (auto& [sid, node] : placed) {
    auto r = call(*c, sid, "execute_code", code_args(pwd_script));
    BOOST_CHECK_EQUAL(r.get_string("node", ""), node);
    auto& w = node == w1->id ? *w1 : *w2;
    BOOST_CHECK_MESSAGE(contains(r.get_string("output", ""), "PWD=" + w.workdir),
                        r.dump());
    if (sid == "s1")
      break; // two scripts are enough
  }
  // The CLI front: same output and exit codes as the local command.
  auto o = cli_env();
  auto res = test::run_mibyan({"tool", "--connect", gw->address, "--session",
                               "s0", "terminal", R"({"command":"pwd"})"},
                              o);
  BOOST_CHECK_EQUAL(res.exit_code, 0);
  BOOST_CHECK_MESSAGE(contains(res.out, "\"node\":\"" + placed["s0"] + "\""),
                      res.out << res.err);
  res = test::run_mibyan({"tool", "--connect", gw->address, "no_such_tool",
                          "{}"},
                         o);
  BOOST_CHECK_EQUAL(res.exit_code, 2);
  BOOST_CHECK(contains(res.err, "unknown tool"));
  o.input = "{\"tool\":\"execute_code\",\"args\":{\"code\":\"x = 41\"}}\n"
            "{\"tool\":\"execute_code\",\"args\":{\"code\":\"print(x + 1)\"}}\n";
  res = test::run_mibyan({"tool", "--connect", gw->address, "--stdin"}, o);
  BOOST_CHECK_EQUAL(res.exit_code, 0);
  BOOST_CHECK_MESSAGE(contains(res.out, "42"), res.out << res.err);
  // nodes --connect lists all three.
  res = test::run_mibyan({"nodes", "--connect", gw->address}, cli_env());
  BOOST_CHECK_EQUAL(res.exit_code, 0);
  for (auto* n : {gw.get(), w1.get(), w2.get()})
    BOOST_CHECK_MESSAGE(contains(res.out, n->id), res.out << res.err);
}

BOOST_AUTO_TEST_CASE(model_turn_through_the_gateway_runs_code_on_a_worker) {
  test::http_server provider;
  json::value s1;
  s1["path"] = "/v1/chat/completions";
  s1["status"] = 200;
  s1["body"] = test::completion("", "execute_code", code_args(pwd_script));
  provider.script(s1.dump());
  json::value s2 = s1;
  s2["body"] = test::completion("all done");
  provider.script(s2.dump());
  auto gw = start({"--role", "gateway", "--provider", "custom", "--base-url",
                   provider.url("/v1"), "--model", "m"});
  auto w1 = start({"--role", "worker", "--join", gw->address});
  {
    auto c = connect(gw->address);
    wait_members(*c, 2);
  }
  auto res = test::run_mibyan({"run", "--connect", gw->address, "--json",
                               "where do you run?"},
                              cli_env());
  BOOST_CHECK_MESSAGE(res.exit_code == 0, res.out << res.err << gw->err());
  BOOST_CHECK(contains(res.out, "all done"));
  auto bodies = test::request_bodies(provider);
  BOOST_REQUIRE_EQUAL(bodies.size(), 2u);
  auto second = bodies[1].dump();
  BOOST_CHECK_MESSAGE(contains(second, "PWD=" + w1->workdir), second);
  BOOST_CHECK_MESSAGE(contains(second, w1->id), second);
  // A worker refuses turns.
  res = test::run_mibyan({"run", "--connect", w1->address, "hi"}, cli_env());
  BOOST_CHECK_EQUAL(res.exit_code, 2);
  BOOST_CHECK(contains(res.err, "gateway"));
}

BOOST_AUTO_TEST_CASE(serve_join_runs_tools_on_a_worker) {
  test::http_server provider;
  json::value s1;
  s1["path"] = "/v1/chat/completions";
  s1["status"] = 200;
  s1["body"] = test::completion("", "terminal", R"({"command":"pwd"})");
  provider.script(s1.dump());
  json::value s2 = s1;
  s2["body"] = test::completion("served from the cluster");
  provider.script(s2.dump());
  auto w1 = start({"--role", "worker"});
  auto gw = start_serve({"--join", w1->address, "--provider", "custom",
                         "--base-url", provider.url("/v1"), "--model", "m"});
  BOOST_REQUIRE_MESSAGE(gw->pid > 0, gw->err());
  {
    auto c = connect(w1->address);
    wait_members(*c, 2);
  }
  auto out = http_post(gw->address, "/v1/chat/completions",
                       R"({"model":"m","stream":false,"messages":[)"
                       R"({"role":"user","content":"where?"}]})");
  BOOST_CHECK_MESSAGE(contains(out, " 200 ")
                        && contains(out, "served from the cluster"),
                      out << gw->err());
  auto bodies = test::request_bodies(provider);
  BOOST_REQUIRE_EQUAL(bodies.size(), 2u);
  // The tool result the model saw: the worker's directory and its id.
  auto second = bodies[1].dump();
  BOOST_CHECK_MESSAGE(contains(second, w1->workdir), second);
  BOOST_CHECK_MESSAGE(contains(second, "\\\"node\\\"")
                        && contains(second, w1->id),
                      second);
  // SIGTERM drains, leaves and exits 0; the worker sees it go.
  BOOST_CHECK_EQUAL(gw->stop(), 0);
  {
    auto c = connect(w1->address);
    wait_members(*c, 1, "left");
  }
  // Refused joins exit 2 with the reason: a wrong key, nobody there.
  auto bad = start_serve({"--join", w1->address},
                         {{"MIBYAN_CLUSTER_KEY", "another-key"}});
  BOOST_CHECK_EQUAL(bad->exit_code, 2);
  BOOST_CHECK_MESSAGE(contains(bad->err(), "wrong cluster key"), bad->err());
  auto none = start_serve({"--join", "127.0.0.1:1"});
  BOOST_CHECK_EQUAL(none->exit_code, 2);
  BOOST_CHECK_MESSAGE(contains(none->err(), "cannot join"), none->err());
}

BOOST_AUTO_TEST_CASE(killed_worker_mid_cell_answers_and_moves_the_session) {
  // Without checkpoints the state goes with the worker (with them:
  // kernel_checkpoint_cluster_test).
  code_execution_extra = "  checkpoint: off\n";
  auto gw = start({"--role", "gateway"});
  auto w1 = start({"--role", "worker", "--join", gw->address});
  auto w2 = start({"--role", "worker", "--join", gw->address});
  auto c = connect(gw->address);
  wait_members(*c, 3);
  auto first = call(*c, "victim", "execute_code", code_args("x = 1"));
  auto node = first.get_string("node", "");
  BOOST_REQUIRE(node == w1->id || node == w2->id);
  auto& doomed = node == w1->id ? *w1 : *w2;
  auto& other = node == w1->id ? *w2 : *w1;
  auto pending = std::async(std::launch::async, [&] {
    return c->call_tool(tool_call_request{
      "victim", "long", "execute_code",
      marked_cell("victim-started", "60"), ""});
  });
  // Once the cell runs, kill its worker outright.
  BOOST_REQUIRE(cell_started(doomed.workdir, "victim-started"));
  ::kill(doomed.pid, SIGKILL);
  BOOST_REQUIRE_MESSAGE(pending.wait_for(seconds{30})
                          == std::future_status::ready,
                        "the in-flight call hung after its worker died");
  auto lost = pending.get();
  BOOST_CHECK_MESSAGE(contains(lost.result_json, "\"worker_lost\":true"),
                      lost.result_json);
  BOOST_CHECK_MESSAGE(contains(lost.result_json, "kernel state"),
                      lost.result_json);
  // The next call of the session lands on the other worker, with a fresh
  // kernel that says so.
  auto next = call(*c, "victim", "execute_code", code_args("print(x)"));
  BOOST_CHECK_EQUAL(next.get_string("node", ""), other.id);
  BOOST_CHECK_MESSAGE(next.dump().find("\"state_reset\":true")
                        != std::string::npos,
                      next.dump());
  BOOST_CHECK_MESSAGE(contains(next.dump(), "NameError"), next.dump());
  wait_members(*c, 1, "lost");
  BOOST_CHECK_EQUAL(state_of(*c, doomed.id), "lost");
}

BOOST_AUTO_TEST_CASE(lost_gateway_cells_are_interrupted_on_its_workers) {
  auto gw = start({"--role", "gateway"});
  auto w1 = start({"--role", "worker", "--join", gw->address});
  auto c = connect(gw->address);
  wait_members(*c, 2);
  auto pending = std::async(std::launch::async, [&] {
    return c->call_tool(tool_call_request{
      "orphan", "long", "execute_code",
      marked_cell("orphan-started", "60"), ""});
  });
  BOOST_REQUIRE(cell_started(w1->workdir, "orphan-started"));
  ::kill(gw->pid, SIGKILL);
  // The client sees its member go, and is answered.
  BOOST_REQUIRE(pending.wait_for(seconds{30}) == std::future_status::ready);
  BOOST_CHECK(contains(pending.get().result_json, "was lost"));
  auto want = "gateway " + gw->id + " gone: interrupted 1 session(s)";
  for (int i = 0; i < 300 && !contains(w1->err(), want); ++i)
    std::this_thread::sleep_for(milliseconds{50});
  BOOST_CHECK_MESSAGE(contains(w1->err(), want), w1->err());
  // The worker itself keeps serving.
  auto direct = connect(w1->address);
  auto r = call(*direct, "fresh", "terminal", R"({"command":"echo still"})");
  BOOST_CHECK(contains(r.get_string("output", ""), "still"));
}

BOOST_AUTO_TEST_CASE(drain_finishes_running_calls_and_leaves) {
  auto gw = start({"--role", "gateway"});
  auto w1 = start({"--role", "worker", "--join", gw->address});
  auto c = connect(gw->address);
  wait_members(*c, 2);
  auto pending = std::async(std::launch::async, [&] {
    return c->call_tool(tool_call_request{
      "d", "slow", "execute_code", marked_cell("slow-started", "1.5"), ""});
  });
  // The drain begins while the cell runs (it sleeps on after the marker).
  BOOST_REQUIRE(cell_started(w1->workdir, "slow-started"));
  auto code = w1->stop(SIGTERM);
  BOOST_CHECK_EQUAL(code, 0);
  BOOST_REQUIRE(pending.wait_for(seconds{30}) == std::future_status::ready);
  auto r = pending.get();
  BOOST_CHECK_MESSAGE(contains(r.result_json, "finished"), r.result_json);
  wait_members(*c, 1, "left");
  BOOST_CHECK_EQUAL(state_of(*c, w1->id), "left");
  // Nothing to place on now: an error, not a hang.
  auto none = call(*c, "new-session", "terminal", R"({"command":"true"})");
  BOOST_CHECK_MESSAGE(contains(none.get_string("error", ""), "No live worker"),
                      none.dump());
}

BOOST_AUTO_TEST_CASE(refusals_name_their_reason) {
  auto gw = start({"--role", "all"});
  // A wrong key: refused on both sides.
  auto bad = start({"--role", "worker", "--join", gw->address}, {},
                   {{"MIBYAN_CLUSTER_KEY", "another-key"}});
  BOOST_CHECK_EQUAL(bad->exit_code, 2);
  BOOST_CHECK_MESSAGE(contains(bad->err(), "wrong cluster key"), bad->err());
  for (int i = 0; i < 100 && !contains(gw->err(), "wrong cluster key"); ++i)
    std::this_thread::sleep_for(milliseconds{50});
  BOOST_CHECK_MESSAGE(contains(gw->err(), "wrong cluster key"), gw->err());
  // A different message type list: refused, naming both sides.
  auto other = start({"--role", "worker", "--join", gw->address}, {},
                     {{"MIBYAN_TEST_TYPE_DIGEST_SALT", "perturbed"}});
  BOOST_CHECK_EQUAL(other->exit_code, 2);
  BOOST_CHECK_MESSAGE(contains(other->err(), "protocol mismatch")
                        && contains(other->err(), gw->id)
                        && contains(other->err(), "speaks protocol 1"),
                      other->err());
  BOOST_CHECK_MESSAGE(contains(gw->err(), "protocol mismatch"), gw->err());
  // A client with a wrong key.
  auto o = cli_env();
  o.env["MIBYAN_CLUSTER_KEY"] = "another-key";
  auto res = test::run_mibyan({"nodes", "--connect", gw->address}, o);
  BOOST_CHECK_EQUAL(res.exit_code, 2);
  BOOST_CHECK_MESSAGE(contains(res.err, "wrong cluster key"), res.err);
  // The client API gives each failure its code; only a refusal is final.
  {
    auto wrong = client_options();
    wrong.cluster.key = "another-key-0123456789";
    auto r = cluster_client::connect(gw->address, wrong);
    BOOST_CHECK(!r);
    BOOST_CHECK(r.code == status_code::permission_denied);
    BOOST_CHECK(cluster_client::refused(r.get_status()));
    BOOST_CHECK_MESSAGE(contains(r.error, "wrong cluster key"), r.error);
    // With several addresses a refusal stays the answer (it is final), not
    // "no cluster member answered".
    r = cluster_client::connect(gw->address + "," + gw->address, wrong);
    BOOST_CHECK(r.code == status_code::permission_denied);
    auto nobody = cluster_client::connect("127.0.0.1:1", client_options());
    BOOST_CHECK(nobody.code == status_code::unavailable);
    BOOST_CHECK(!cluster_client::refused(nobody.get_status()));
    auto garbage = cluster_client::connect(" , ", client_options());
    BOOST_CHECK(garbage.code == status_code::invalid_argument);
    BOOST_CHECK(!cluster_client::refused(garbage.get_status()));
    auto port = cluster_client::connect("no-port", client_options());
    BOOST_CHECK(port.code == status_code::invalid_argument);
    if (std::getenv("MIBYAN_CLUSTER_KEY") == nullptr) {
      auto keyless = client_options();
      keyless.cluster.key.clear();
      auto k = cluster_client::connect(gw->address, keyless);
      BOOST_CHECK(k.code == status_code::config_invalid);
      BOOST_CHECK(cluster_client::refused(k.get_status()));
    }
    // A good client: its member list and tool names as results.
    auto good = connect(gw->address);
    auto names = good->tool_names();
    BOOST_REQUIRE_MESSAGE(names, names.error);
    BOOST_CHECK(std::find(names->begin(), names->end(), "terminal")
                != names->end());
  }
  // A non-loopback address without TLS.
  auto open = start({}, {}, {}, "0.0.0.0:0");
  BOOST_CHECK_EQUAL(open->exit_code, 2);
  BOOST_CHECK_MESSAGE(contains(open->err(), "without TLS"), open->err());
  // The cluster still serves.
  auto c = connect(gw->address);
  auto r = call(*c, "ok", "terminal", R"({"command":"echo fine"})");
  BOOST_CHECK(contains(r.get_string("output", ""), "fine"));
}

BOOST_AUTO_TEST_CASE(garbage_from_a_peer_is_dropped) {
  auto gw = start({"--role", "all"});
  auto port = port_of(gw->address);
  for (int i = 0; i < 3; ++i) {
    int fd = dial_loopback(port);
    std::string junk(4096, '\xff');
    junk += "GET / HTTP/1.1\r\n\r\n";
    (void) !::write(fd, junk.data(), junk.size());
    std::this_thread::sleep_for(milliseconds{100});
    ::close(fd);
  }
  auto c = connect(gw->address);
  auto r = call(*c, "after-garbage", "terminal", R"({"command":"echo alive"})");
  BOOST_CHECK_MESSAGE(contains(r.get_string("output", ""), "alive"), r.dump());
}

BOOST_AUTO_TEST_CASE(an_unauthenticated_peer_gets_nothing_but_the_handshake) {
  auto gw = start({"--role", "all"});
  auto port = port_of(gw->address);
  {
    caf::actor_system_config cfg;
    configure_actor_system(cfg, nullptr);
    cfg.set("middleman.app-identifiers",
            std::vector<std::string>{"mibyan-v1"});
    caf::actor_system sys{cfg};
    auto member = sys.middleman().remote_actor("127.0.0.1", port);
    if (!member) // (the message would be evaluated eagerly)
      BOOST_FAIL("remote_actor: " << sys.render(member.error()));
    caf::scoped_actor self{sys};
    int refused = 0;
    auto expect_error = [&](auto&&... xs) {
      self->request(*member, seconds{30}, std::forward<decltype(xs)>(xs)...)
        .receive([&](caf::message& m) {
                   BOOST_ERROR("answered without a handshake: "
                               << caf::to_string(m));
                 },
                 [&](caf::error&) { ++refused; });
    };
    expect_error(members_atom_v);
    expect_error(tools_atom_v);
    expect_error(invoke_atom_v, tool_request{"x", "c", "terminal",
                                             R"({"command":"touch /tmp/no"})",
                                             "", false});
    expect_error(work_atom_v, tool_request{"x", "c", "terminal", "{}", "",
                                           false});
    expect_error(turn_atom_v, cluster_turn{});
    // A proof without a hello, and a fake member's heartbeat.
    self->request(*member, seconds{30}, auth_atom_v,
                  cluster_proof{"intruder", "00"})
      .receive([&](cluster_welcome& w) {
                 BOOST_CHECK(!w.refusal.empty());
                 BOOST_CHECK(w.members.empty());
               },
               [&](caf::error&) { ++refused; });
    self->send(*member, heartbeat_atom_v,
               member_info{"intruder", "127.0.0.1:1", "worker", "up", 0, 0, 0,
                           10});
    BOOST_CHECK_EQUAL(refused, 5);
    // CAF delivers exit messages from any peer: the member must ignore them.
    self->send_exit(*member, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(*member, caf::exit_reason::kill);
  }
  // The killed front door is replaced on the same port: wait until the new
  // one listens (the old listener closes asynchronously, and a connect in
  // between meets the closing one).
  for (int i = 0; i < 200 && !contains(gw->err(), "new front door listening");
       ++i)
    std::this_thread::sleep_for(milliseconds{50});
  BOOST_TEST_MESSAGE("gateway log: " << gw->err());
  auto c = connect(gw->address);
  auto m = members(*c);
  BOOST_CHECK_EQUAL(m.as_array().size(), 1u);
  auto r = call(*c, "after", "terminal", R"({"command":"echo served"})");
  BOOST_CHECK(contains(r.get_string("output", ""), "served"));
}

BOOST_AUTO_TEST_CASE(tls_cluster_with_certificates_from_the_openssl_cli) {
  auto run = [&](std::vector<std::string> argv) {
    test::process_options o;
    o.cwd = dir.path();
    auto r = test::run_process(argv, o);
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, argv[1] << ": " << r.err);
  };
  run({"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
       "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=mibyan-test-ca"});
  run({"openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout",
       "node.key", "-out", "node.csr", "-subj", "/CN=127.0.0.1"});
  run({"openssl", "x509", "-req", "-in", "node.csr", "-CA", "ca.pem",
       "-CAkey", "ca.key", "-CAcreateserial", "-out", "node.pem", "-days",
       "2"});
  auto tls = "  tls_cert: " + (dir / "node.pem") + "\n  tls_key: "
             + (dir / "node.key") + "\n  tls_ca: " + (dir / "ca.pem") + "\n";
  auto gw = start({"--role", "gateway"}, tls);
  auto w1 = start({"--role", "worker", "--join", gw->address}, tls);
  BOOST_REQUIRE_MESSAGE(w1->pid > 0, "TLS join failed: " << w1->err());
  auto o = client_options();
  o.cluster.tls_cert = dir / "node.pem";
  o.cluster.tls_key = dir / "node.key";
  o.cluster.tls_ca = dir / "ca.pem";
  auto made = cluster_client::connect(gw->address, o);
  BOOST_REQUIRE_MESSAGE(made, "TLS client: " << made.error);
  auto c = std::move(*made);
  wait_members(*c, 2);
  auto r = call(*c, "tls", "terminal", R"({"command":"echo secret-path"})");
  BOOST_CHECK_EQUAL(r.get_string("node", ""), w1->id);
  BOOST_CHECK(contains(r.get_string("output", ""), "secret-path"));
  // A plain (non-TLS) client gets nothing from a TLS node.
  auto plain = cluster_client::connect(gw->address, client_options());
  BOOST_CHECK(!plain);
  BOOST_CHECK(!cluster_client::refused(plain.get_status()));
}

// Two network namespaces joined by a veth pair: a gateway in one, a worker
// in the other, on real (non-loopback) addresses. Cutting the link must
// fail the call in flight and mark the worker lost; nothing hangs.
BOOST_AUTO_TEST_CASE(partition_between_network_namespaces) {
  auto tag = std::to_string(::getpid() % 100000);
  std::string ns_a = "mbyA" + tag, ns_b = "mbyB" + tag;
  std::string veth_a = "mva" + tag, veth_b = "mvb" + tag;
  auto sh = [](std::vector<std::string> argv) {
    test::process_options o;
    o.timeout_seconds = 30;
    return test::run_process(argv, o).exit_code;
  };
  if (::geteuid() != 0 || sh({"ip", "netns", "add", ns_a}) != 0) {
    BOOST_TEST_MESSAGE("SKIPPED: network namespaces are not permitted here "
                       "(needs root and `ip netns`)");
    return;
  }
  struct cleanup {
    std::function<void()> f;
    ~cleanup() { f(); }
  } guard{[&] {
    sh({"ip", "netns", "del", ns_a});
    sh({"ip", "netns", "del", ns_b});
  }};
  BOOST_REQUIRE(sh({"ip", "netns", "add", ns_b}) == 0);
  BOOST_REQUIRE(sh({"ip", "link", "add", veth_a, "type", "veth", "peer",
                    "name", veth_b}) == 0);
  BOOST_REQUIRE(sh({"ip", "link", "set", veth_a, "netns", ns_a}) == 0);
  BOOST_REQUIRE(sh({"ip", "link", "set", veth_b, "netns", ns_b}) == 0);
  for (auto& [ns, dev, ip] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
         {ns_a, veth_a, "10.213.7.1/24"}, {ns_b, veth_b, "10.213.7.2/24"}}) {
    BOOST_REQUIRE(sh({"ip", "-n", ns, "addr", "add", ip, "dev", dev}) == 0);
    BOOST_REQUIRE(sh({"ip", "-n", ns, "link", "set", dev, "up"}) == 0);
    BOOST_REQUIRE(sh({"ip", "-n", ns, "link", "set", "lo", "up"}) == 0);
  }
  std::string insecure = "  insecure: true\n";
  auto gw = start({"--role", "gateway"}, insecure, {}, "10.213.7.1:0",
                  {"ip", "netns", "exec", ns_a});
  auto w = start({"--role", "worker", "--join", gw->address}, insecure, {},
                 "10.213.7.2:0", {"ip", "netns", "exec", ns_b});
  BOOST_REQUIRE_MESSAGE(w->pid > 0, w->err());
  BOOST_CHECK(contains(gw->err(), "cluster.insecure"));
  auto client = [&](std::vector<std::string> args) {
    std::vector<std::string> argv{"ip", "netns", "exec", ns_a,
                                  test::mibyan_binary()};
    argv.insert(argv.end(), args.begin(), args.end());
    auto o = cli_env();
    o.timeout_seconds = 90;
    return test::run_process(argv, o);
  };
  bool up = false;
  for (int i = 0; i < 60 && !up; ++i) {
    auto r = client({"nodes", "--connect", gw->address, "--json"});
    up = contains(r.out, "\"id\":\"" + w->id + "\",\"address\":\""
                           + w->address + "\",\"role\":\"worker\","
                             "\"state\":\"up\"");
    if (!up)
      std::this_thread::sleep_for(milliseconds{200});
  }
  BOOST_REQUIRE_MESSAGE(up, "the worker never joined: " << w->err());
  auto pending = std::async(std::launch::async, [&] {
    return client({"tool", "--connect", gw->address, "--session", "cut",
                   "execute_code", marked_cell("cut-started", "60")});
  });
  BOOST_REQUIRE(cell_started(w->workdir, "cut-started"));
  BOOST_REQUIRE(sh({"ip", "-n", ns_b, "link", "set", veth_b, "down"}) == 0);
  BOOST_REQUIRE_MESSAGE(pending.wait_for(seconds{60})
                          == std::future_status::ready,
                        "the call hung after the link was cut");
  auto r = pending.get();
  BOOST_CHECK_EQUAL(r.exit_code, 0);
  BOOST_CHECK_MESSAGE(contains(r.out, "\"worker_lost\":true"), r.out << r.err);
  auto nodes = client({"nodes", "--connect", gw->address, "--json"});
  BOOST_CHECK_MESSAGE(contains(nodes.out, "\"state\":\"lost\""), nodes.out);
  // The cut-off gateway answers at once: no worker left.
  auto none = client({"tool", "--connect", gw->address, "--session", "next",
                      "terminal", R"({"command":"true"})"});
  BOOST_CHECK_MESSAGE(contains(none.out, "No live worker"), none.out);
}

BOOST_AUTO_TEST_SUITE_END()
