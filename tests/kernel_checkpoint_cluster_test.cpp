#define BOOST_TEST_MODULE kernel_checkpoint_cluster
#include "tests/support/paths.hpp"
#include <boost/test/unit_test.hpp>

// Kernel state that survives in a cluster (docs/cluster.md, "Kernel
// state"): real `mibyan node` processes on loopback, a gateway and two
// workers. A worker killed with SIGKILL, and a worker drained with
// SIGTERM: the session's next cell runs on the other worker with the
// namespace restored from the checkpoint the gateway stored. Waits are
// bounded polls; nothing asserts a time.

#include <chrono>
#include <csignal>
#include <string>
#include <thread>

#include "base/json.hpp"
#include "cluster/client.hpp"
#include "storage/checkpoint_store.hpp"
#include "storage/lmdb/lmdb_checkpoint_store.hpp"
#include "storage/lmdb/lmdb_env.hpp"
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mibyan;
using namespace std::chrono;

#include "tests/support/cluster_fixture.hpp"

using namespace mibyan::test;

namespace {

// The execution count of the newest checkpoint of `session` in the LMDB
// store under `home` (-1: none yet). Read-only; the node keeps running.
int64_t stored_count(const std::string& home, const std::string& session) {
  lmdb_options lo;
  lo.dir = home + "/sessions";
  lo.read_only = true;
  auto env = lmdb_env::open(lo);
  if (!env)
    return -1;
  auto ck = open_lmdb_checkpoint_store(**env);
  if (!ck)
    return -1;
  auto got = (*ck)->latest(session);
  if (!got || !*got)
    return -1;
  // "MCKE1 <64 hex> <count>\n<payload>"
  auto& b = (*got)->bytes;
  if (b.size() < 72)
    return -1;
  return std::stoll(b.substr(71, b.find('\n') - 71));
}

std::string lost_names(const json::value& r) {
  std::string out;
  if (auto k = r.find("kernel"); k && k->is_object())
    if (auto l = k->find("not_restored"); l && l->is_array())
      for (auto& e : l->as_array())
        out += e.get_string("name") + ";";
  return out;
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(kernel_checkpoint_cluster, cluster_fixture)

BOOST_AUTO_TEST_CASE(killed_worker_state_comes_back_on_the_other_worker) {
  auto [gw, w1, w2, c] = start_gateway_and_two_workers();
  auto r1 = call(*c, "keep", "execute_code", code_args("d = {'a': 1}"));
  auto node = r1.get_string("node", "");
  BOOST_REQUIRE_MESSAGE(node == w1->id || node == w2->id, r1.dump());
  call(*c, "keep", "execute_code",
       code_args("recs = [{'i': i, 'name': 'r%d' % i} "
                 "for i in range(10000)]"));
  auto r3 = call(*c, "keep", "execute_code",
                 code_args("import re\nrx = re.compile(r'r(\\d+)')\n"
                           "f = open('handle.txt', 'w')\n"
                           "lam = lambda x: x + 1\n"));
  BOOST_REQUIRE_MESSAGE(r3.get_string("status") == "success", r3.dump());
  BOOST_CHECK_EQUAL(r3.get_string("node", ""), node);
  // The gateway keeps the checkpoints: wait for the third cell's.
  auto gw_home = dir / "node1";
  int64_t count = -1;
  for (int i = 0; i < 600 && count < 3; ++i) {
    count = stored_count(gw_home, "keep");
    if (count < 3)
      std::this_thread::sleep_for(milliseconds{50});
  }
  BOOST_REQUIRE_MESSAGE(count >= 3, "the gateway stored no checkpoint of "
                                    "cell 3 (last: " << count << ")");
  auto& doomed = node == w1->id ? *w1 : *w2;
  auto& other = node == w1->id ? *w2 : *w1;
  ::kill(doomed.pid, SIGKILL);
  wait_members(*c, 1, "lost");
  auto next = call(*c, "keep", "execute_code",
                   code_args("print(d['a'], len(recs), "
                             "rx.match('r42').group(1))"));
  BOOST_CHECK_EQUAL(next.get_string("node", ""), other.id);
  BOOST_CHECK_MESSAGE(next.get_string("status") == "success", next.dump());
  BOOST_CHECK_EQUAL(next.get_string("output"), "1 10000 42\n");
  auto k = next.find("kernel");
  BOOST_REQUIRE(k && k->is_object());
  BOOST_CHECK_MESSAGE(k->get_bool("state_restored", false), next.dump());
  BOOST_CHECK(!k->get_bool("state_reset", true));
  BOOST_CHECK(!next.get_bool("state_reset", false));
  auto lost = lost_names(next);
  BOOST_CHECK_MESSAGE(contains(lost, "f;") && contains(lost, "lam;"), lost);
  BOOST_CHECK_MESSAGE(!contains(lost, "rx;") && !contains(lost, "recs;"),
                      lost);
  BOOST_CHECK_MESSAGE(contains(next.get_string("note"), "restored"),
                      next.dump());
}

BOOST_AUTO_TEST_CASE(drain_moves_an_idle_session_with_its_state) {
  auto [gw, w1, w2, c] = start_gateway_and_two_workers();
  auto r1 = call(*c, "mover", "execute_code", code_args("v = list(range(5))"));
  auto node = r1.get_string("node", "");
  BOOST_REQUIRE(node == w1->id || node == w2->id);
  auto r2 = call(*c, "mover", "execute_code",
                 code_args("w = {'k': 'v'}\nimport collections\n"
                           "cnt = collections.Counter('abca')"));
  BOOST_REQUIRE_MESSAGE(r2.get_string("status") == "success", r2.dump());
  auto& leaving = node == w1->id ? *w1 : *w2;
  auto& other = node == w1->id ? *w2 : *w1;
  // SIGTERM drains: the idle kernel's final checkpoint is stored before
  // the worker leaves.
  BOOST_CHECK_EQUAL(leaving.stop(SIGTERM), 0);
  BOOST_CHECK_GE(stored_count(dir / "node1", "mover"), 2);
  wait_members(*c, 1, "left");
  auto next = call(*c, "mover", "execute_code",
                   code_args("print(v, w['k'], cnt['a'])"));
  BOOST_CHECK_EQUAL(next.get_string("node", ""), other.id);
  BOOST_CHECK_EQUAL(next.get_string("output"), "[0, 1, 2, 3, 4] v 2\n");
  auto k = next.find("kernel");
  BOOST_REQUIRE(k && k->is_object());
  BOOST_CHECK_MESSAGE(k->get_bool("state_restored", false), next.dump());
  BOOST_CHECK_EQUAL(k->get_int("checkpoint_age_cells", -1), 0);
  BOOST_CHECK_MESSAGE(lost_names(next).empty(), next.dump());
}

// One node that is gateway and worker at once, with one blocking-pool
// thread: its kernels' checkpoint requests (made from that thread, which
// waits for the answer) are served by the node itself. Served from the
// same pool they would wait for themselves until the request timed out.
BOOST_AUTO_TEST_CASE(role_all_with_one_blocking_thread_stores_checkpoints) {
  auto node = start({"--role", "all"}, "runtime:\n  blocking_threads: 1\n");
  auto c = connect(node->address);
  wait_members(*c, 1);
  auto r1 = call(*c, "solo", "execute_code", code_args("a = [1, 2]"));
  BOOST_REQUIRE_MESSAGE(r1.get_string("status") == "success", r1.dump());
  auto r2 = call(*c, "solo", "execute_code", code_args("a.append(3)"));
  BOOST_REQUIRE_MESSAGE(r2.get_string("status") == "success", r2.dump());
  // Well inside the 60 s a request to the member may wait.
  int64_t count = -1;
  for (int i = 0; i < 300 && count < 2; ++i) {
    count = stored_count(dir / "node1", "solo");
    if (count < 2)
      std::this_thread::sleep_for(milliseconds{50});
  }
  BOOST_CHECK_MESSAGE(count >= 2, "no checkpoint of cell 2 within 15 s "
                                  "(last: " << count << ")");
  // The drain's final checkpoints go the same way.
  BOOST_CHECK_EQUAL(node->stop(SIGTERM), 0);
}

BOOST_AUTO_TEST_CASE(checkpoint_off_in_a_cluster_resets_as_before) {
  code_execution_extra = "  checkpoint: off\n";
  auto [gw, w1, w2, c] = start_gateway_and_two_workers();
  auto r1 = call(*c, "plain", "execute_code", code_args("q = 1"));
  auto node = r1.get_string("node", "");
  auto& doomed = node == w1->id ? *w1 : *w2;
  ::kill(doomed.pid, SIGKILL);
  wait_members(*c, 1, "lost");
  auto next = call(*c, "plain", "execute_code", code_args("print(q)"));
  BOOST_CHECK(contains(next.dump(), "NameError"));
  BOOST_CHECK(contains(next.dump(), "\"state_reset\":true"));
  BOOST_CHECK_EQUAL(stored_count(dir / "node1", "plain"), -1);
}

BOOST_AUTO_TEST_SUITE_END()
