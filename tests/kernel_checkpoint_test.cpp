#define BOOST_TEST_MODULE kernel_checkpoint
#include <boost/test/unit_test.hpp>

// Kernel namespace checkpoints on one node (docs/execute_code.md,
// "Checkpoints"): the checkpoint store on every store backend
// (tests/support/store_backends.hpp: LMDB, and PostgreSQL on a throw-away
// server), the HMAC envelope and its round trip through the store, restore
// after a runtime restart and after `kill -9` of a real `mibyan tool
// --stdin` process, reset, and bad input (values that cannot be pickled, a
// __reduce__ that hangs, a self-referencing namespace, a tampered, a
// planted, a truncated checkpoint, one from a newer Python, a pickle
// bomb). Waits are bounded polls; nothing asserts a time.

#include <chrono>
#include <csignal>
#include <fcntl.h>
#include <poll.h>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "actors/kernel_checkpoints.hpp"
#include "base/json.hpp"
#include "runtime/runtime.hpp"
#include "storage/checkpoint_store.hpp"
#include "storage/lmdb/lmdb_checkpoint_store.hpp"
#include "storage/lmdb/lmdb_env.hpp"
#include "storage/session_store.hpp"
#include "tests/support/kernel_options.hpp"
#include "tests/support/paths.hpp"
#include "tests/support/process.hpp"
#include "tests/support/store_backends.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mibyan;
using namespace std::chrono;

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// A checkpoint file as the runner writes it (kernels/mibyan_checkpoint.py):
// MAGIC, header length, header JSON, records.
std::string checkpoint_file(const json::value& header,
                            const std::string& records) {
  auto head = header.dump();
  std::string out = "MIBYANCK";
  uint32_t n = static_cast<uint32_t>(head.size());
  out.push_back(static_cast<char>(n >> 24));
  out.push_back(static_cast<char>(n >> 16));
  out.push_back(static_cast<char>(n >> 8));
  out.push_back(static_cast<char>(n));
  return out + head + records;
}

json::value header_for(std::vector<std::pair<std::string, size_t>> values,
                       int python_minor = 8) {
  json::value h;
  h["format"] = 1;
  h["python"] = json::array{json::value{3}, json::value{python_minor},
                            json::value{0}};
  h["pickle_protocol"] = 4;
  h["execution_count"] = 7;
  h["modules"] = json::value::make_object();
  h["aliases"] = json::value::make_object();
  json::array vs;
  for (auto& [name, len] : values) {
    json::value v;
    v["name"] = name;
    v["type"] = "object";
    v["records"] = json::array{json::value{static_cast<int64_t>(len)}};
    vs.push_back(std::move(v));
  }
  h["values"] = std::move(vs);
  h["not_saved"] = json::array{};
  return h;
}

// Protocol-0 pickles (pickle.loads reads every protocol).
const std::string pickled_int_41 = "I41\n.";
// bytearray(10**13): far over the kernel's address-space limit.
const std::string pickled_bomb = "cbuiltins\nbytearray\n(I10000000000000\ntR.";

struct ckpt_fixture {
  test::temp_dir home;
  test::temp_dir work;
  std::unique_ptr<runtime> rt;

  int64_t max_mb = 64;

  void start() {
    auto opts = test::kernel_test_options(home.path());
    opts.code_execution.checkpoint = "on";
    opts.code_execution.checkpoint_max_mb = max_mb;
    std::string err;
    auto made = create_runtime(opts);
    BOOST_REQUIRE_MESSAGE(made, made.error);
    rt = std::move(*made);
  }

  void restart() {
    rt.reset();
    start();
  }

  json::value exec(const std::string& code, const std::string& session = "s1",
                   bool reset = false) {
    return test::run_cell(*rt, work.path(), code, session, reset);
  }

  std::shared_ptr<kernel_checkpoints> hub() {
    auto h = kernel_checkpoints_of(*rt);
    BOOST_REQUIRE(h && h->enabled() && h->store());
    return h;
  }

  // Waits until the stored checkpoint of `session` holds the state after
  // cell `count` (stored, or that cell changed nothing).
  void wait_stored(int64_t count, const std::string& session = "s1") {
    auto h = hub();
    int64_t seen = -1;
    for (int i = 0; i < 600; ++i) {
      seen = h->covered_count(session);
      if (seen >= count)
        return;
      std::this_thread::sleep_for(milliseconds{50});
    }
    BOOST_FAIL("no checkpoint of " << count << " cells was stored (last: "
                                   << seen << ")");
  }

  // Stores `bytes` as the session's newest checkpoint, as is.
  void plant(const std::string& bytes, const std::string& session = "s1") {
    auto h = hub();
    auto st = h->store()->put(session, h->next_seq(), bytes);
    BOOST_REQUIRE_MESSAGE(st, st.error);
  }
};

const json::value* kernel_of(const json::value& r) {
  auto k = r.find("kernel");
  BOOST_REQUIRE_MESSAGE(k && k->is_object(), r.dump());
  return k;
}

std::string lost_names(const json::value& r) {
  std::string out;
  if (auto l = kernel_of(r)->find("not_restored"); l && l->is_array())
    for (auto& e : l->as_array())
      out += e.get_string("name") + "=" + e.get_string("reason") + ";";
  return out;
}

} // namespace

MIBYAN_STORE_TEST_CASE(store_keeps_the_newest_and_drops_with_the_session,
                       test::store_fixture) {
  std::shared_ptr<session_store> shared = std::move(store);
  new_session ns;
  ns.id = "sess-a";
  BOOST_REQUIRE(shared->create_session(ns));
  auto ck = open_checkpoint_store(shared);
  BOOST_REQUIRE_MESSAGE(ck, ck.error);
  auto& c = **ck;
  // Larger than a chunk: split and joined again.
  std::string big(checkpoint_chunk_bytes * 2 + 123, 'x');
  big[checkpoint_chunk_bytes] = 'y';
  BOOST_REQUIRE(c.put("sess-a", 5, big));
  auto got = c.latest("sess-a");
  BOOST_REQUIRE(got && *got);
  BOOST_CHECK_EQUAL((*got)->seq, 5u);
  BOOST_CHECK((*got)->bytes == big);
  // An older number never replaces a newer checkpoint.
  BOOST_REQUIRE(c.put("sess-a", 3, "old"));
  got = c.latest("sess-a");
  BOOST_CHECK_EQUAL((*got)->seq, 5u);
  BOOST_REQUIRE(c.put("sess-a", 9, "new"));
  got = c.latest("sess-a");
  BOOST_CHECK_EQUAL((*got)->bytes, "new");
  BOOST_REQUIRE(c.put("sess-b", 1, "other"));
  // Deleting the session deletes its checkpoints, in the same transaction.
  BOOST_REQUIRE(shared->delete_session("sess-a"));
  got = c.latest("sess-a");
  BOOST_REQUIRE(got);
  BOOST_CHECK(!*got);
  got = c.latest("sess-b");
  BOOST_REQUIRE(got && *got);
  BOOST_CHECK(c.remove("sess-b"));
  BOOST_CHECK(!*c.latest("sess-b"));
  BOOST_CHECK(!c.put("", 1, "x"));
  BOOST_CHECK(c.latest("").code == status_code::invalid_argument);
  BOOST_CHECK(c.remove("").code == status_code::invalid_argument);
  // The checkpoint store keeps the session store alive.
  std::weak_ptr<session_store> weak = shared;
  shared.reset();
  BOOST_CHECK(!weak.expired());
  BOOST_REQUIRE(c.put("sess-c", 1, "kept"));
  BOOST_CHECK_EQUAL((*c.latest("sess-c"))->bytes, "kept");
}

// A sealed envelope (every byte value, NULs included) comes back from the
// store byte for byte and opens; one changed stored byte is refused.
MIBYAN_STORE_TEST_CASE(sealed_envelope_round_trips_through_the_store,
                       test::store_fixture) {
  std::shared_ptr<session_store> shared = std::move(store);
  auto ck = open_checkpoint_store(shared);
  BOOST_REQUIRE_MESSAGE(ck, ck.error);
  kernel_checkpoints hub(true, 1 << 20);
  hub.set_key(std::string(32, 'k'));
  std::string payload;
  for (int round = 0; round < 3; ++round)
    for (int b = 0; b < 256; ++b)
      payload.push_back(static_cast<char>(b));
  auto sealed = hub.seal("sess-e", 7, payload);
  BOOST_REQUIRE((*ck)->put("sess-e", 7, sealed));
  auto got = (*ck)->latest("sess-e");
  BOOST_REQUIRE_MESSAGE(got, got.error);
  BOOST_REQUIRE(*got);
  BOOST_CHECK_EQUAL((*got)->session, "sess-e");
  BOOST_CHECK_EQUAL((*got)->seq, 7u);
  BOOST_REQUIRE_EQUAL((*got)->bytes.size(), sealed.size());
  BOOST_CHECK((*got)->bytes == sealed);
  auto opened = hub.open("sess-e", (*got)->bytes);
  BOOST_REQUIRE_MESSAGE(opened, opened.error);
  BOOST_CHECK_EQUAL(opened->first, 7);
  BOOST_CHECK(opened->second == payload);
  // Tampered bytes stored as a newer checkpoint: stored, but refused.
  auto bad = sealed;
  bad[bad.size() / 2] ^= 1;
  BOOST_REQUIRE((*ck)->put("sess-e", 8, bad));
  got = (*ck)->latest("sess-e");
  BOOST_REQUIRE(got && *got);
  BOOST_CHECK_EQUAL((*got)->seq, 8u);
  BOOST_CHECK(!hub.open("sess-e", (*got)->bytes));
  BOOST_CHECK(!hub.open("sess-other", sealed));
}

BOOST_AUTO_TEST_CASE(envelope_refuses_tampering_truncation_and_other_sessions) {
  kernel_checkpoints hub(true, 1 << 20);
  std::string payload = "payload bytes \n with a newline";
  BOOST_CHECK(!hub.open("s", hub.seal("s", 3, payload))); // no key yet
  hub.set_key(std::string(32, 'k'));
  auto sealed = hub.seal("s", 3, payload);
  auto opened = hub.open("s", sealed);
  BOOST_REQUIRE_MESSAGE(opened, opened.error);
  BOOST_CHECK_EQUAL(opened->first, 3);
  BOOST_CHECK_EQUAL(opened->second, payload);
  auto flipped = sealed;
  flipped[flipped.size() - 3] ^= 1;
  BOOST_CHECK(hub.open("s", flipped).code == status_code::permission_denied);
  BOOST_CHECK(!hub.open("s", sealed.substr(0, sealed.size() - 1)));
  BOOST_CHECK(!hub.open("s", sealed.substr(0, 20)));
  BOOST_CHECK(!hub.open("other", sealed));
  auto recount = sealed;
  recount[6 + 64 + 1] = '4'; // the execution count is covered too
  BOOST_CHECK(!hub.open("s", recount));
  BOOST_CHECK(hub.open("s", "garbage").code == status_code::data_corrupt);
  kernel_checkpoints other(true, 1 << 20);
  other.set_key(std::string(32, 'j'));
  BOOST_CHECK(!other.open("s", sealed));
  // A cluster's members derive one key from the shared one.
  BOOST_CHECK(kernel_checkpoints::cluster_key("a")
              == kernel_checkpoints::cluster_key("a"));
  BOOST_CHECK(kernel_checkpoints::cluster_key("a")
              != kernel_checkpoints::cluster_key("b"));
}

// The runner's change detection (identity snapshots of containers, the
// check before a frame) against every way of changing a namespace, and
// what it pickles: tests/support/checkpoint_changes_check.py.
BOOST_AUTO_TEST_CASE(every_kind_of_change_is_noticed) {
  test::temp_dir dir;
  auto res = test::run_process(
    {"python3", test::test_source_dir() + "/support/checkpoint_changes_check.py",
     test::source_dir() + "/kernels/mibyan_checkpoint.py", dir.path()});
  BOOST_CHECK_MESSAGE(res.exit_code == 0, res.out << res.err);
  BOOST_CHECK_MESSAGE(contains(res.out, "0 failures"), res.out << res.err);
}

BOOST_FIXTURE_TEST_SUITE(node, ckpt_fixture)

// Values changed in place (no name rebound) are in the next checkpoint,
// in a namespace small enough for the check before the frame and in one
// that is checked after it.
BOOST_AUTO_TEST_CASE(changes_in_place_are_checkpointed) {
  start();
  exec("small = [1, 2]\nd = {'k': [1]}\nb = bytearray(b'ab')\n");
  exec("big = [{'i': i} for i in range(2000)]\n");
  wait_stored(2);
  exec("small.append(3)");
  wait_stored(3);
  exec("d['k'].append(2)\nb[0] = 0x7a");
  wait_stored(4);
  exec("big[1500]['i'] = -1");
  wait_stored(5);
  exec("pass");
  wait_stored(6);
  restart();
  auto r = exec("print(small, d, b, big[1500], big[1499])");
  BOOST_CHECK_EQUAL(r.get_string("output"),
                    "[1, 2, 3] {'k': [1, 2]} bytearray(b'zb') {'i': -1} "
                    "{'i': 1499}\n");
  BOOST_CHECK_EQUAL(kernel_of(r)->get_int("checkpoint_age_cells", -1), 0);
}

BOOST_AUTO_TEST_CASE(restart_restores_the_namespace) {
  start();
  auto r = exec("d = {'a': 1, 'b': [1, 2]}\nalias = d\nimport json\n");
  BOOST_REQUIRE_MESSAGE(r.get_string("status") == "success", r.dump());
  exec("recs = [{'i': i, 's': 'x' * 10} for i in range(10000)]\n");
  exec("import re\nrx = re.compile('a+b')\nf = open('held.txt', 'w')\n"
       "lam = lambda x: x\n"
       "def fn():\n    return 1\n");
  wait_stored(3);
  // The key lives in $MIBYAN_HOME, private.
  struct stat key_stat{};
  BOOST_REQUIRE(::stat((home.path() + "/checkpoint.key").c_str(), &key_stat)
                == 0);
  BOOST_CHECK_EQUAL(key_stat.st_mode & 0777, 0600);
  restart();
  auto next = exec("print(d['a'], len(recs), rx.pattern, alias is d, "
                   "json.dumps([1]))");
  BOOST_CHECK_MESSAGE(next.get_string("status") == "success", next.dump());
  BOOST_CHECK_EQUAL(next.get_string("output"), "1 10000 a+b True [1]\n");
  auto k = kernel_of(next);
  BOOST_CHECK(k->get_bool("state_restored", false));
  BOOST_CHECK(!k->get_bool("state_reset", true));
  BOOST_CHECK_EQUAL(k->get_int("checkpoint_age_cells", -1), 0);
  // The kernel's count goes on from the checkpoint's.
  BOOST_CHECK_EQUAL(k->get_int("execution_count", 0), 4);
  auto lost = lost_names(next);
  BOOST_CHECK_MESSAGE(contains(lost, "f=") && contains(lost, "lam=")
                        && contains(lost, "fn="),
                      lost);
  BOOST_CHECK_MESSAGE(!contains(lost, "rx=") && !contains(lost, "recs="),
                      lost);
  auto note = next.get_string("note");
  BOOST_CHECK_MESSAGE(contains(note, "restored from a checkpoint")
                        && contains(note, "lam"),
                      note);
  // Only the first cell reports it.
  auto after = exec("print(len(d))");
  BOOST_CHECK(kernel_of(after)->find("state_restored") == nullptr);
  BOOST_CHECK_EQUAL(after.get_string("output"), "2\n");
}

// The node died after cells whose checkpoints never landed: after the
// restart the session's stored history knows how far it got, and the
// restored checkpoint's age counts the cells it lacks.
BOOST_AUTO_TEST_CASE(age_after_a_restart_counts_the_cells_past_the_checkpoint) {
  start();
  exec("x = 1");
  wait_stored(1);
  auto old = hub()->store()->latest("s1");
  BOOST_REQUIRE(old && *old);
  auto first = (*old)->bytes;
  exec("x = 2");
  auto third = exec("x = 3");
  wait_stored(3);
  // The conversation recorded the cells' results, as a turn does.
  auto store = session_store_of(*rt);
  BOOST_REQUIRE(store);
  new_session ns;
  ns.id = "s1";
  (void) store->create_session(ns);
  chat_message m;
  m.role = "tool";
  m.tool_call_id = "call-3";
  m.tool_name = "execute_code";
  m.content = third.dump();
  auto appended = store->append_message("s1", m);
  BOOST_REQUIRE_MESSAGE(appended, appended.error);
  store.reset();
  // Cells 2 and 3 were lost with the node: the first checkpoint is the
  // newest one stored.
  plant(first);
  restart();
  auto r = exec("print(x)");
  BOOST_CHECK_EQUAL(r.get_string("output"), "1\n");
  auto k = kernel_of(r);
  BOOST_CHECK(k->get_bool("state_restored", false));
  BOOST_CHECK_EQUAL(k->get_int("checkpoint_age_cells", -1), 2);
  BOOST_CHECK_MESSAGE(contains(r.get_string("note"), "2 cell(s) old"),
                      r.dump());
}

BOOST_AUTO_TEST_CASE(reset_drops_the_checkpoint) {
  start();
  exec("x = 41");
  wait_stored(1);
  auto r = exec("print(x)", "s1", true);
  BOOST_CHECK(contains(r.get_string("output"), "NameError"));
  BOOST_CHECK(kernel_of(r)->get_bool("state_reset", false));
  BOOST_CHECK(kernel_of(r)->find("state_restored") == nullptr);
  wait_stored(1); // the fresh kernel's first cell
  restart();
  r = exec("print(x)");
  BOOST_CHECK(contains(r.get_string("output"), "NameError"));
}

BOOST_AUTO_TEST_CASE(values_that_cannot_be_saved_are_reported_by_name) {
  start();
  auto r = exec(
    "import time\n"
    "class Hang:\n"
    "    def __reduce__(self):\n"
    "        time.sleep(1000)\n"
    "class Bad:\n"
    "    def __reduce__(self):\n"
    "        raise RuntimeError('refuses to pickle')\n"
    "h = Hang()\nb = Bad()\n"
    "g = globals()\n"
    "me = {}\nme['me'] = me\n"
    "n = 5\n");
  BOOST_REQUIRE_MESSAGE(r.get_string("status") == "success", r.dump());
  wait_stored(1);
  restart();
  auto next = exec("print(n, me['me'] is me)");
  BOOST_CHECK_EQUAL(next.get_string("output"), "5 True\n");
  auto lost = lost_names(next);
  BOOST_CHECK_MESSAGE(contains(lost, "h=not saved: pickling took longer"),
                      lost);
  BOOST_CHECK_MESSAGE(contains(lost, "b=not saved: RuntimeError: refuses"),
                      lost);
  BOOST_CHECK_MESSAGE(contains(lost, "g=not saved: it is the kernel's "
                                     "namespace"),
                      lost);
  BOOST_CHECK_MESSAGE(contains(lost, "Hang=not saved: a class defined"),
                      lost);
}

BOOST_AUTO_TEST_CASE(the_largest_values_beyond_the_cap_are_left_out) {
  max_mb = 1;
  start();
  exec("big = 'x' * 3000000\nmid = 'y' * 600000\nsmall = [1, 2, 3]\n");
  wait_stored(1);
  restart();
  auto r = exec("print(len(mid), small)");
  BOOST_CHECK_EQUAL(r.get_string("output"), "600000 [1, 2, 3]\n");
  auto lost = lost_names(r);
  BOOST_CHECK_MESSAGE(contains(lost, "big=not saved: left out")
                        && contains(lost, "checkpoint_max_mb"),
                      lost);
  BOOST_CHECK_MESSAGE(!contains(lost, "mid="), lost);
}

BOOST_AUTO_TEST_CASE(a_tampered_checkpoint_is_refused_and_the_kernel_starts_fresh) {
  start();
  exec("secret = 'kept'");
  wait_stored(1);
  auto got = hub()->store()->latest("s1");
  BOOST_REQUIRE(got && *got);
  auto bytes = (*got)->bytes;
  bytes[bytes.size() - 5] ^= 0x20;
  plant(bytes);
  restart();
  auto r = exec("print(secret)");
  BOOST_CHECK(contains(r.get_string("output"), "NameError"));
  auto k = kernel_of(r);
  BOOST_CHECK(k->get_bool("state_reset", false));
  BOOST_CHECK(!k->get_bool("state_restored", true));
  BOOST_CHECK_MESSAGE(contains(r.get_string("note"), "HMAC"), r.dump());
  // The node and the kernel go on.
  BOOST_CHECK_EQUAL(exec("print(1 + 1)").get_string("output"), "2\n");
}

BOOST_AUTO_TEST_CASE(planted_and_truncated_checkpoints_are_refused) {
  start();
  exec("y = 1");
  wait_stored(1);
  // Bytes written into the store by someone without the key.
  plant(checkpoint_file(header_for({{"bomb", pickled_bomb.size()}}),
                        pickled_bomb));
  restart();
  auto r = exec("print(y)");
  BOOST_CHECK_MESSAGE(contains(r.get_string("note"), "not a sealed")
                        || contains(r.get_string("note"), "HMAC"),
                      r.dump());
  BOOST_CHECK(contains(r.get_string("output"), "NameError"));
  // A sealed one cut short in the store.
  exec("z = 2");
  wait_stored(r.find("kernel")->get_int("execution_count", 1) + 1);
  auto got = hub()->store()->latest("s1");
  BOOST_REQUIRE(got && *got);
  plant((*got)->bytes.substr(0, (*got)->bytes.size() - 10));
  restart();
  r = exec("print(z)");
  BOOST_CHECK(contains(r.get_string("output"), "NameError"));
  BOOST_CHECK(contains(r.get_string("note"), "HMAC"));
}

BOOST_AUTO_TEST_CASE(sealed_bad_payloads_are_reported_by_name) {
  start();
  exec("pass");
  wait_stored(1);
  auto h = hub();
  // A pickle bomb that passed the HMAC (the key was used for it): the
  // kernel unpickles it under its memory limit, reports it and keeps the
  // rest.
  auto records = pickled_int_41 + pickled_bomb;
  auto payload = checkpoint_file(
    header_for({{"ok", pickled_int_41.size()}, {"bomb", pickled_bomb.size()}}),
    records);
  BOOST_REQUIRE(h->save("s1", h->next_seq(), 7, payload));
  h.reset(); // it holds the store open
  restart();
  auto r = exec("print(ok)");
  BOOST_CHECK_EQUAL(r.get_string("output"), "41\n");
  BOOST_CHECK(kernel_of(r)->get_bool("state_restored", false));
  wait_stored(8);
  auto lost = lost_names(r);
  BOOST_CHECK_MESSAGE(contains(lost, "bomb=")
                        && (contains(lost, "memory")
                            || contains(lost, "Memory")),
                      lost);
  // Truncated inside the records: what is whole comes back.
  payload = checkpoint_file(
    header_for({{"ok", pickled_int_41.size()}, {"cut", 100}}),
    pickled_int_41 + "I5\n");
  h = hub();
  BOOST_REQUIRE(h->save("s1", h->next_seq(), 7, payload));
  h.reset(); // it holds the store open
  restart();
  r = exec("print(ok)");
  BOOST_CHECK_EQUAL(r.get_string("output"), "41\n");
  BOOST_CHECK_MESSAGE(contains(lost_names(r), "cut=the checkpoint is "
                                              "truncated"),
                      lost_names(r));
  wait_stored(8);
  // From a newer Python: refused as a whole, the kernel starts fresh.
  payload = checkpoint_file(header_for({{"ok", pickled_int_41.size()}}, 99),
                            pickled_int_41);
  h = hub();
  BOOST_REQUIRE(h->save("s1", h->next_seq(), 7, payload));
  h.reset(); // it holds the store open
  restart();
  r = exec("print(ok)");
  BOOST_CHECK(contains(r.get_string("output"), "NameError"));
  BOOST_CHECK_MESSAGE(contains(r.get_string("note"), "Python 3.99"),
                      r.dump());
  BOOST_CHECK(!kernel_of(r)->get_bool("state_restored", true));
}

BOOST_AUTO_TEST_CASE(checkpoints_off_keeps_the_old_behaviour) {
  auto opts = test::kernel_test_options(home.path());
  std::string err;
  auto made = create_runtime(opts); // "auto": off on a single node
  BOOST_REQUIRE_MESSAGE(made, made.error);
  rt = std::move(*made);
  BOOST_CHECK(!kernel_checkpoints_of(*rt)->enabled());
  exec("v = 1");
  rt.reset();
  auto again = create_runtime(opts);
  BOOST_REQUIRE_MESSAGE(again, again.error);
  rt = std::move(*again);
  auto r = exec("print(v)");
  BOOST_CHECK(contains(r.get_string("output"), "NameError"));
  BOOST_CHECK(kernel_of(r)->find("state_restored") == nullptr);
  struct stat st{};
  BOOST_CHECK(::stat((home.path() + "/checkpoint.key").c_str(), &st) != 0);
}

BOOST_AUTO_TEST_SUITE_END()

// One-shot `mibyan tool execute_code` processes: each exits right after
// its cell, and the checkpoint of that cell (large: it takes a while to
// pickle and store) is stored before the exit, so the next one-shot has
// the state.
BOOST_AUTO_TEST_CASE(one_shot_tool_exits_after_its_checkpoint_is_stored) {
  test::temp_dir home, work;
  home.write("config.yaml",
             "code_execution:\n  checkpoint: on\n  sandbox: off\n"
             "  prestart_kernels: 0\napprovals:\n  unattended_mode: approve\n"
             "  single_query_mode: approve\n");
  test::process_options o;
  o.env = {{"MIBYAN_HOME", home.path()}};
  o.cwd = work.path();
  auto run = [&](const std::string& code) {
    json::value a;
    a["code"] = code;
    auto res = test::run_mibyan({"tool", "--session", "once", "execute_code",
                                 a.dump()},
                                o);
    BOOST_REQUIRE_MESSAGE(res.exit_code == 0, res.out << res.err);
    return res.out;
  };
  run("big = [str(i) for i in range(1500000)]\nsmall = {'k': 1}");
  auto out = run("small['k'] += 1\nprint(len(big), small)");
  BOOST_CHECK_MESSAGE(contains(out, "1500000 {'k': 2}"), out);
  BOOST_CHECK_MESSAGE(contains(out, "\"state_restored\":true"), out);
  out = run("print(small)");
  BOOST_CHECK_MESSAGE(contains(out, "{'k': 2}"), out);
}

// A real node killed with SIGKILL: `mibyan tool --stdin` builds state,
// is killed, and a new process's next cell has it back.
BOOST_AUTO_TEST_CASE(killed_node_restores_on_restart) {
  test::temp_dir home, work;
  home.write("config.yaml",
             "code_execution:\n  checkpoint: on\n  sandbox: off\n"
             "  prestart_kernels: 0\napprovals:\n  unattended_mode: approve\n"
             "  single_query_mode: approve\n");
  auto line = [](const std::string& code) {
    json::value l, a;
    a["code"] = code;
    l["tool"] = "execute_code";
    l["args"] = a;
    return l.dump() + "\n";
  };
  int in[2], out[2];
  BOOST_REQUIRE(::pipe(in) == 0 && ::pipe(out) == 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setenv("MIBYAN_HOME", home.path().c_str(), 1);
    ::chdir(work.path().c_str());
    ::dup2(in[0], 0);
    ::dup2(out[1], 1);
    ::close(in[1]);
    ::close(out[0]);
    auto bin = test::mibyan_binary();
    ::execl(bin.c_str(), bin.c_str(), "tool", "--stdin", "--session", "ks",
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(in[0]);
  ::close(out[1]);
  auto read_line = [&] {
    std::string s;
    auto deadline = steady_clock::now() + seconds{60};
    while (steady_clock::now() < deadline) {
      pollfd p{out[0], POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0)
        continue;
      char c;
      if (::read(out[0], &c, 1) != 1 || c == '\n')
        break;
      s += c;
    }
    return s;
  };
  for (auto code : {std::string{"data = {'k': [1, 2, 3]}"},
                    std::string{"total = sum(data['k'])"}}) {
    auto l = line(code);
    BOOST_REQUIRE(::write(in[1], l.data(), l.size())
                  == static_cast<ssize_t>(l.size()));
    auto answer = read_line();
    BOOST_REQUIRE_MESSAGE(contains(answer, "success"), answer);
  }
  // Wait until the second cell's checkpoint is durable, then kill -9.
  bool stored = false;
  for (int i = 0; i < 600 && !stored; ++i) {
    lmdb_options lo;
    lo.dir = home.path() + "/sessions";
    lo.read_only = true;
    if (auto env = lmdb_env::open(lo)) {
      if (auto ck = open_lmdb_checkpoint_store(**env)) {
        auto got = (*ck)->latest("ks");
        if (got && *got) {
          // The envelope's count follows "MCKE1 <mac> ".
          auto& b = (*got)->bytes;
          stored = b.size() > 72 && b.compare(71, 2, "2\n") == 0;
        }
      }
    }
    if (!stored)
      std::this_thread::sleep_for(milliseconds{50});
  }
  BOOST_REQUIRE_MESSAGE(stored, "the checkpoint of cell 2 never appeared");
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ::close(in[1]);
  ::close(out[0]);
  test::process_options o;
  o.env = {{"MIBYAN_HOME", home.path()}};
  o.cwd = work.path();
  o.input = line("print(total, data)");
  auto res = test::run_mibyan({"tool", "--stdin", "--session", "ks"}, o);
  BOOST_CHECK_MESSAGE(contains(res.out, "6 {'k': [1, 2, 3]}"), res.out
                                                                 << res.err);
  BOOST_CHECK_MESSAGE(contains(res.out, "\"state_restored\":true"), res.out);
}
