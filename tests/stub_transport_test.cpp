// The transport of the scripts' mibyan_tools module
// (kernels/mibyan_tools_transport.py, docs/kernel_protocol.md): a real
// Python kernel harness against a fake RPC server on a Unix socket. Calls
// return dicts; refusals, odd and double-encoded results; concurrent and
// out-of-order replies; a lost reply is never resent; reconnects, forks
// and subprocesses; timeouts; and the leader/follower read path of
// threaded calls. The stubs themselves: stub_generator_test.
#define BOOST_TEST_MODULE stub_transport
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <set>
#include <thread>

#include "tests/support/kernel_harness.hpp"
#include "tests/support/kernel_rpc_server.hpp"
#include "tests/support/paths.hpp"
#include "tests/support/process.hpp"

using namespace mibyan;
using namespace mibyan::test;
using namespace std::chrono_literals;

namespace {


// A harness wired to a fake server on a socket inside its own dir.
struct rpc_setup {
  explicit rpc_setup(fake_rpc_options server_opts,
                     kernel_harness_options kopts = {},
                     std::string token = "secret-token")
    : sock_dir(),
      server(sock_dir / "rpc.sock",
             [&] {
               if (server_opts.token.empty())
                 server_opts.token = "secret-token";
               return std::move(server_opts);
             }()),
      kernel([&] {
        kopts.rpc_socket = sock_dir / "rpc.sock";
        kopts.rpc_token = token;
        return std::move(kopts);
      }()) {
  }
  temp_dir sock_dir;
  fake_rpc_server server;
  kernel_harness kernel;
};

// Kernel options under which every thread calls on the one shared
// connection (MIBYAN_RPC_THREAD_CONNECTIONS=0): the cases that exercise its
// reader hand-offs.
kernel_harness_options sharing(kernel_harness_options ko = {}) {
  ko.extra_env.push_back("MIBYAN_RPC_THREAD_CONNECTIONS=0");
  return ko;
}

// Answers like the default server, after sleeping `delay` when the request's
// path starts with "slow".
std::function<std::string(const fake_rpc_request&)>
slow_answer(std::chrono::milliseconds delay) {
  return [delay](const fake_rpc_request& r) -> std::string {
    auto args = r.msg.find("args");
    auto path = args != nullptr ? args->get_string("path", "") : "";
    if (path.rfind("slow", 0) == 0)
      std::this_thread::sleep_for(delay);
    json::value echo = json::value::make_object();
    echo["tool"] = r.msg.get_string("tool", "");
    if (args != nullptr)
      echo["args"] = *args;
    echo["connection"] = r.connection;
    return echo.dump();
  };
}

// Checks that `server` got `n` calls, each with an id of its own, all on
// the first connection.
void check_one_connection(const fake_rpc_server& server, size_t n) {
  auto reqs = server.requests();
  BOOST_REQUIRE(reqs.size() == n);
  std::set<std::string> ids;
  for (auto& r : reqs) {
    ids.insert(r.msg.get_string("id"));
    BOOST_TEST(r.connection == 1);
  }
  BOOST_TEST(ids.size() == n);
}

} // namespace

BOOST_AUTO_TEST_SUITE(stub_transport)

// -- transport ----------------------------------------------------------------

BOOST_AUTO_TEST_CASE(call_returns_the_result_as_a_dict) {
  rpc_setup s{{}};
  auto f = s.kernel.run(
    "from mibyan_tools import web_search, web_extract, terminal\n"
    "import json, os\n"
    "r = web_search('mibyan')\n"
    "print(type(r).__name__, json.dumps(r, sort_keys=True))\n"
    "print(web_extract(['http://x'])['args'])\n"
    "print(terminal('ls', workdir='/tmp')['args'])\n"
    "print(os.getpid())");
  BOOST_REQUIRE(f.ok);
  BOOST_TEST(f.status() == "ok", f.trace());
  std::string pid = f.out().substr(f.out().rfind('\n', f.out().size() - 2)
                                   + 1);
  pid.pop_back();
  BOOST_TEST(f.out().find("dict {\"args\": {\"limit\": null, \"query\": "
                          "\"mibyan\"}, \"connection\": 1, \"tool\": "
                          "\"web_search\"}\n")
             == 0u,
             f.out());
  BOOST_TEST(f.out().find("{'urls': ['http://x'], 'char_limit': None}\n")
             != std::string::npos);
  BOOST_TEST(f.out().find("{'command': 'ls', 'timeout': None, 'workdir': "
                          "'/tmp'}\n")
             != std::string::npos);
  auto reqs = s.server.requests();
  BOOST_REQUIRE(reqs.size() == 3u);
  for (size_t i = 0; i < reqs.size(); ++i) {
    auto& m = reqs[i].msg;
    BOOST_TEST(m.get_string("id") == pid + "-" + std::to_string(i + 1));
    BOOST_TEST(m.get_string("token") == "secret-token");
    BOOST_TEST(reqs[i].connection == 1);
  }
  // Keys in wire order: id, tool, args, token, cell; null defaults are
  // sent.
  BOOST_TEST(reqs[1].line.find("{\"id\": \"" + pid + "-2\", \"tool\": "
                               "\"web_extract\", \"args\": {\"urls\": "
                               "[\"http://x\"], \"char_limit\": null}, "
                               "\"token\": \"secret-token\", \"cell\": ")
             == 0u,
             reqs[1].line);
  BOOST_TEST(s.server.connections() == 1);
}

BOOST_AUTO_TEST_CASE(wrong_token_is_sent_and_refusal_returns_as_value) {
  rpc_setup s{{}, {}, "wrong-token"};
  auto f = s.kernel.run("from mibyan_tools import read_file\n"
                        "print(read_file('a.txt'))");
  BOOST_TEST(f.status() == "ok");
  BOOST_TEST(f.out() == "{'error': 'Unauthorized RPC request'}\n");
  auto reqs = s.server.requests();
  BOOST_REQUIRE(reqs.size() == 1u);
  BOOST_TEST(reqs[0].msg.get_string("token") == "wrong-token");
}

BOOST_AUTO_TEST_CASE(double_encoded_and_odd_results_are_decoded) {
  fake_rpc_options o;
  o.answer = [](const fake_rpc_request& r) -> std::string {
    auto args = r.msg.find("args");
    auto path = args != nullptr ? args->get_string("path", "") : "";
    if (path == "double")
      return json::quote("{\"content\": \"x\", \"total_lines\": 1}");
    if (path == "string")
      return "\"just text\"";
    if (path == "garbage")
      return "not json at all";
    if (path == "bom")
      return "\xef\xbb\xbf{\"ok\": true}";
    if (path == "control")
      return "{\"content\": \"a\tb\"}";
    return "{\"error\": \"File not found: " + path + "\"}";
  };
  rpc_setup s{o};
  auto f = s.kernel.run("from mibyan_tools import read_file\n"
                        "for p in ['double', 'string', 'garbage', 'bom',\n"
                        "          'control', 'missing']:\n"
                        "    print(repr(read_file(p)))");
  BOOST_REQUIRE(f.ok);
  BOOST_TEST(f.status() == "ok", f.trace());
  BOOST_TEST(f.out() == "{'content': 'x', 'total_lines': 1}\n"
                        "'just text'\n"
                        "'not json at all'\n"
                        "{'ok': True}\n"
                        "{'content': 'a\\tb'}\n"
                        "{'error': 'File not found: missing'}\n");
}

BOOST_AUTO_TEST_CASE(concurrent_calls_get_their_own_out_of_order_replies) {
  fake_rpc_options o;
  o.hold = 16;  // nothing is answered until all 16 are in flight
  rpc_setup s{o, sharing()};
  auto f = s.kernel.run(
    "from concurrent.futures import ThreadPoolExecutor\n"
    "from mibyan_tools import read_file\n"
    "with ThreadPoolExecutor(16) as pool:\n"
    "    res = list(pool.map(lambda i: read_file('p%d' % i, limit=i + 1),\n"
    "                        range(16)))\n"
    "print(all(r['args']['path'] == 'p%d' % i and\n"
    "          r['args']['limit'] == i + 1 for i, r in enumerate(res)))\n",
    60s);
  BOOST_REQUIRE(f.ok);
  BOOST_TEST(f.status() == "ok", f.trace());
  BOOST_TEST(f.out() == "True\n");
  check_one_connection(s.server, 16);
}

BOOST_AUTO_TEST_CASE(lost_reply_raises_outcome_unknown_and_never_resends) {
  fake_rpc_options o;
  o.close_after_read = true;
  rpc_setup s{o};
  auto f = s.kernel.run(
    "from mibyan_tools import write_file\n"
    "try:\n"
    "    write_file('a.txt', 'data')\n"
    "except ConnectionError as e:\n"
    "    print(type(e).__name__, e)\n");
  BOOST_REQUIRE(f.ok);
  BOOST_TEST(f.out() == "ConnectionError mibyan_tools: connection lost after "
                        "'write_file' was sent; outcome unknown \xe2\x80\x94 "
                        "check the effect before retrying.\n");
  std::this_thread::sleep_for(300ms);
  auto reqs = s.server.requests();
  BOOST_REQUIRE(reqs.size() == 1u);
  BOOST_TEST(reqs[0].msg.get_string("tool") == "write_file");
  BOOST_TEST(s.server.connections() == 1);
  // An uncaught loss fails the cell, and a later call connects afresh.
  auto g = s.kernel.run("from mibyan_tools import write_file\n"
                        "write_file('b.txt', 'data')");
  BOOST_TEST(g.status() == "error");
  BOOST_TEST(g.trace().find("ConnectionError: mibyan_tools: connection lost "
                            "after 'write_file' was sent; outcome unknown")
             != std::string::npos);
  BOOST_TEST(s.server.requests().size() == 2u);
  BOOST_TEST(s.server.connections() == 2);
}

BOOST_AUTO_TEST_CASE(closed_idle_connection_reconnects_before_send) {
  fake_rpc_options o;
  o.close_after_reply = true;
  rpc_setup s{o};
  auto f = s.kernel.run("from mibyan_tools import read_file\n"
                        "import time\n"
                        "a = read_file('one')\n"
                        "time.sleep(0.3)\n"
                        "b = read_file('two')\n"
                        "print(a['connection'], b['connection'])");
  BOOST_REQUIRE(f.ok);
  BOOST_TEST(f.status() == "ok", f.trace());
  BOOST_TEST(f.out() == "1 2\n");
  BOOST_TEST(s.server.requests().size() == 2u);
}

BOOST_AUTO_TEST_CASE(forked_child_and_subprocess_get_their_own_connection) {
  rpc_setup s{{}};
  auto f = s.kernel.run(
    "import os, subprocess, sys\n"
    "from mibyan_tools import read_file\n"
    "first = read_file('parent-1')['connection']\n"
    "r, w = os.pipe()\n"
    "pid = os.fork()\n"
    "if pid == 0:\n"
    "    os.close(r)\n"
    "    c = read_file('child')['connection']\n"
    "    os.write(w, str(c).encode())\n"
    "    os._exit(0)\n"
    "os.close(w)\n"
    "os.waitpid(pid, 0)\n"
    "child = int(os.read(r, 100))\n"
    "second = read_file('parent-2')['connection']\n"
    "sub = subprocess.run([sys.executable, '-c', 'from mibyan_tools import "
    "read_file; print(read_file(\"sub\")[\"connection\"])'],\n"
    "                     capture_output=True, text=True)\n"
    "print(first, child, second, sub.stdout.strip(), sub.stderr)");
  BOOST_REQUIRE(f.ok);
  BOOST_TEST(f.status() == "ok", f.trace());
  BOOST_TEST(f.out() == "1 2 1 3 \n");
  auto reqs = s.server.requests();
  BOOST_REQUIRE(reqs.size() == 4u);
  std::set<std::string> pids;
  for (auto& r : reqs) {
    auto id = r.msg.get_string("id");
    pids.insert(id.substr(0, id.find('-')));
  }
  BOOST_TEST(pids.size() == 3u);
  BOOST_TEST(s.server.connections() == 3);
}

BOOST_AUTO_TEST_CASE(missing_or_dead_socket_raises_without_sending) {
  kernel_harness none;  // no MIBYAN_RPC_SOCKET at all
  auto f = none.run("from mibyan_tools import read_file\nread_file('x')");
  BOOST_TEST(f.status() == "error");
  BOOST_TEST(f.trace().find("ConnectionError: mibyan_tools: "
                            "MIBYAN_RPC_SOCKET is not set")
             != std::string::npos,
             f.trace());
  temp_dir d;
  kernel_harness_options o;
  o.rpc_socket = d / "nobody-listens.sock";
  o.rpc_token = "t";
  kernel_harness dead{o};
  auto start = std::chrono::steady_clock::now();
  auto g = dead.run("from mibyan_tools import terminal\nterminal('ls')");
  BOOST_TEST(g.status() == "error");
  BOOST_TEST(g.trace().find("cannot reach the Mibyan host")
               != std::string::npos,
             g.trace());
  BOOST_TEST(g.trace().find("'terminal' was not sent") != std::string::npos);
  BOOST_TEST((std::chrono::steady_clock::now() - start < 5s));
}

BOOST_AUTO_TEST_CASE(missing_reply_times_out_with_outcome_unknown) {
  fake_rpc_options o;
  o.hold = 2;  // a single call is never answered
  kernel_harness_options ko;
  ko.rpc_timeout = 0.5;
  rpc_setup s{o, ko};
  auto start = std::chrono::steady_clock::now();
  auto f = s.kernel.run("from mibyan_tools import terminal\n"
                        "try:\n"
                        "    terminal('sleep 100')\n"
                        "except TimeoutError as e:\n"
                        "    print(e)");
  auto took = std::chrono::steady_clock::now() - start;
  BOOST_REQUIRE(f.ok);
  BOOST_TEST(f.out() == "mibyan_tools: no reply to 'terminal' within 0.5s; "
                        "outcome unknown \xe2\x80\x94 check the effect before "
                        "retrying.\n");
  BOOST_TEST((took < 5s));
  BOOST_TEST(s.server.requests().size() == 1u);
}

BOOST_AUTO_TEST_CASE(unserialisable_arguments_raise_before_sending) {
  rpc_setup s{{}};
  auto f = s.kernel.run("from mibyan_tools import read_file, write_file\n"
                        "for call in (lambda: read_file({1, 2}),\n"
                        "             lambda: write_file('a', float('nan')),\n"
                        "             lambda: read_file(b'bytes')):\n"
                        "    try:\n"
                        "        call()\n"
                        "    except TypeError as e:\n"
                        "        print(str(e).split(':')[1].strip())\n");
  BOOST_REQUIRE(f.ok);
  BOOST_TEST(f.status() == "ok", f.trace());
  BOOST_TEST(f.out() == "the arguments of 'read_file' cannot be sent as JSON\n"
                        "the arguments of 'write_file' cannot be sent as "
                        "JSON\n"
                        "the arguments of 'read_file' cannot be sent as "
                        "JSON\n");
  BOOST_TEST(s.server.requests().empty());
}

BOOST_AUTO_TEST_CASE(function_captured_in_one_cell_works_in_the_next) {
  rpc_setup s{{}};
  BOOST_REQUIRE(s.kernel.run("from mibyan_tools import read_file as rf").ok);
  auto f = s.kernel.run("print(rf('later')['args']['path'])");
  BOOST_TEST(f.out() == "later\n");
  BOOST_TEST(s.server.connections() == 1);
}

BOOST_AUTO_TEST_CASE(sequential_calls_are_fast) {
  rpc_setup s{{}};
  auto f = s.kernel.run("import time\n"
                        "from mibyan_tools import read_file\n"
                        "read_file('warm-up')\n"
                        "t = time.perf_counter()\n"
                        "for i in range(500):\n"
                        "    read_file('f')\n"
                        "print((time.perf_counter() - t) / 500 * 1e6)");
  BOOST_REQUIRE(f.ok);
  BOOST_REQUIRE(f.status() == "ok");
  auto us = std::stod(f.out());
  BOOST_TEST_MESSAGE("tool call round trip: " << us << " us");
  BOOST_TEST(us < 20000.0);
  BOOST_TEST(s.server.requests().size() == 501u);
}

// -- leader/follower read path ------------------------------------------------

BOOST_AUTO_TEST_CASE(single_threaded_calls_start_no_thread) {
  rpc_setup s{{}};
  auto f = s.kernel.run("import threading\n"
                        "from mibyan_tools import read_file\n"
                        "before = threading.active_count()\n"
                        "for i in range(50):\n"
                        "    assert read_file('p%d' % i)['args']['path'] == "
                        "'p%d' % i\n"
                        "print(before, threading.active_count(),\n"
                        "      sorted(t.name for t in threading.enumerate()"
                        "))");
  BOOST_REQUIRE(f.ok);
  BOOST_TEST(f.status() == "ok", f.trace());
  // The runner's own threads are there before and after; none is added.
  auto out = f.out();
  BOOST_TEST(out.find("reader") == std::string::npos, out);
  auto sp = out.find(' ');
  BOOST_REQUIRE(sp != std::string::npos);
  auto sp2 = out.find(' ', sp + 1);
  BOOST_TEST(out.substr(0, sp) == out.substr(sp + 1, sp2 - sp - 1), out);
  BOOST_TEST(s.server.requests().size() == 50u);
  BOOST_TEST(s.server.connections() == 1);
}

// By default a thread that calls while another call is in flight opens a
// connection of its own (up to 8 per process; beyond that, threads share
// the first), and a thread's connection goes when the thread does.
BOOST_AUTO_TEST_CASE(threads_in_flight_get_connections_of_their_own) {
  fake_rpc_options o;
  o.hold = 16;  // all 16 in flight, then answered last-first
  kernel_harness_options ko;
  ko.rpc_timeout = 20;
  rpc_setup s{o, ko};
  auto f = s.kernel.run(
    "import gc, sys\n"
    "from concurrent.futures import ThreadPoolExecutor\n"
    "from mibyan_tools import read_file\n"
    "with ThreadPoolExecutor(16) as pool:\n"
    "    res = list(pool.map(lambda i: read_file('p%d' % i), range(16)))\n"
    "print(all(r['args']['path'] == 'p%d' % i for i, r in enumerate(res)))\n"
    "own = sys.modules['mibyan_tools']._own\n"
    "gc.collect()\n"
    "print(len(own))\n",
    60s);
  BOOST_REQUIRE(f.ok);
  BOOST_TEST(f.status() == "ok", f.trace());
  // The pool's threads have ended: their own connections are gone.
  BOOST_TEST(f.out() == "True\n0\n");
  auto reqs = s.server.requests();
  BOOST_REQUIRE(reqs.size() == 16u);
  std::set<std::string> ids;
  std::set<int> conns;
  for (auto& r : reqs) {
    ids.insert(r.msg.get_string("id"));
    conns.insert(r.connection);
  }
  BOOST_TEST(ids.size() == 16u);
  BOOST_TEST(conns.size() >= 2u);
  BOOST_TEST(s.server.connections() <= 9);
}

BOOST_AUTO_TEST_CASE(sixteen_pool_calls_with_reversed_replies) {
  fake_rpc_options o;
  o.hold = 16;  // all 16 in flight, then answered last-first
  kernel_harness_options ko;
  ko.rpc_timeout = 20;
  rpc_setup s{o, sharing(ko)};
  auto f = s.kernel.run(
    "import threading\n"
    "from concurrent.futures import ThreadPoolExecutor\n"
    "from mibyan_tools import read_file, terminal\n"
    "def one(i):\n"
    "    if i % 2:\n"
    "        return terminal('echo %d' % i)['args']['command']\n"
    "    return read_file('p%d' % i, offset=i)['args']\n"
    "with ThreadPoolExecutor(16) as pool:\n"
    "    res = list(pool.map(one, range(16)))\n"
    "ok = all(r == ('echo %d' % i if i % 2 else\n"
    "                {'path': 'p%d' % i, 'offset': i, 'limit': None})\n"
    "         for i, r in enumerate(res))\n"
    "print(ok, [t.name for t in threading.enumerate()\n"
    "           if 'mibyan-tools' in t.name])\n",
    60s);
  BOOST_REQUIRE(f.ok);
  BOOST_TEST(f.status() == "ok", f.trace());
  BOOST_TEST(f.out() == "True []\n");
  check_one_connection(s.server, 16);
}

// The first caller reads for everyone; its own reply comes last.
BOOST_AUTO_TEST_CASE(reader_routes_others_before_its_own_reply) {
  fake_rpc_options o;
  o.hold = 4;  // replies: d, c, b, then the reader's a
  kernel_harness_options ko;
  ko.rpc_timeout = 10;
  rpc_setup s{o, sharing(ko)};
  auto f = s.kernel.run(
    "import threading, time\n"
    "from mibyan_tools import read_file\n"
    "res = {}\n"
    "def call(p):\n"
    "    res[p] = read_file(p)['args']['path']\n"
    "lead = threading.Thread(target=call, args=('a',))\n"
    "lead.start()\n"
    "time.sleep(0.2)\n"
    "rest = [threading.Thread(target=call, args=(p,)) for p in 'bcd']\n"
    "for t in rest:\n"
    "    t.start()\n"
    "t0 = time.monotonic()\n"
    "for t in [lead] + rest:\n"
    "    t.join()\n"
    "print(sorted(res.items()), time.monotonic() - t0 < 5)\n",
    30s);
  BOOST_REQUIRE(f.ok);
  BOOST_TEST(f.status() == "ok", f.trace());
  BOOST_TEST(f.out() == "[('a', 'a'), ('b', 'b'), ('c', 'c'), ('d', 'd')] "
                        "True\n");
  auto reqs = s.server.requests();
  BOOST_REQUIRE(reqs.size() == 4u);
  BOOST_TEST(reqs[0].msg.find("args")->get_string("path") == "a");
}

// The reader's reply comes first while two calls still wait: the role must
// pass to one of them (no reply would be read otherwise; the timeout is 10 s
// and the cell must end in well under that).
BOOST_AUTO_TEST_CASE(reader_hands_off_when_its_reply_comes_first) {
  fake_rpc_options o;
  o.answer = slow_answer(300ms);  // served in order: a, b, c, 0.3 s each
  kernel_harness_options ko;
  ko.rpc_timeout = 10;
  rpc_setup s{o, sharing(ko)};
  auto f = s.kernel.run(
    "import threading, time\n"
    "from mibyan_tools import read_file\n"
    "res, order = {}, []\n"
    "def call(p):\n"
    "    res[p] = read_file(p)['args']['path']\n"
    "    order.append(p)\n"
    "t0 = time.monotonic()\n"
    "lead = threading.Thread(target=call, args=('slow-a',))\n"
    "lead.start()\n"
    "time.sleep(0.1)\n"
    "rest = [threading.Thread(target=call, args=('slow-' + p,))\n"
    "        for p in 'bc']\n"
    "for t in rest:\n"
    "    t.start()\n"
    "lead.join()\n"
    "lead_done = time.monotonic() - t0\n"
    "for t in rest:\n"
    "    t.join()\n"
    "took = time.monotonic() - t0\n"
    "print(order[0], all(k == v for k, v in res.items()), len(res))\n"
    "print(lead_done < 0.6, 0.8 < took < 3)\n",
    30s);
  BOOST_REQUIRE(f.ok);
  BOOST_TEST(f.status() == "ok", f.trace());
  BOOST_TEST(f.out() == "slow-a True 3\nTrue True\n", f.out());
  BOOST_TEST(s.server.requests().size() == 3u);
  BOOST_TEST(s.server.connections() == 1);
}

// A waiting (non-reading) call times out on its own deadline while the
// reader keeps reading; its late reply is dropped, never misrouted.
BOOST_AUTO_TEST_CASE(follower_times_out_while_the_reader_reads) {
  fake_rpc_options o;
  o.answer = slow_answer(1000ms);  // b queues behind slow-a on the server
  rpc_setup s{o, sharing()};
  auto f = s.kernel.run(
    "import os, threading, time\n"
    "from mibyan_tools import read_file\n"
    "res = {}\n"
    "def lead():\n"
    "    res['a'] = read_file('slow-a')['args']['path']\n"
    "os.environ['MIBYAN_RPC_TIMEOUT'] = '5'\n"
    "t = threading.Thread(target=lead)\n"
    "t.start()\n"
    "time.sleep(0.1)\n"
    "os.environ['MIBYAN_RPC_TIMEOUT'] = '0.4'\n"
    "t0 = time.monotonic()\n"
    "try:\n"
    "    read_file('b')\n"
    "    print('no timeout')\n"
    "except TimeoutError as e:\n"
    "    print(e)\n"
    "print(time.monotonic() - t0 < 0.9)\n"
    "os.environ['MIBYAN_RPC_TIMEOUT'] = '5'\n"
    "t.join()\n"
    "print(res['a'], read_file('after')['args']['path'])\n",
    30s);
  BOOST_REQUIRE(f.ok);
  BOOST_TEST(f.status() == "ok", f.trace());
  BOOST_TEST(f.out() == "mibyan_tools: no reply to 'read_file' within 0.4s; "
                        "outcome unknown \xe2\x80\x94 check the effect before "
                        "retrying.\nTrue\nslow-a after\n",
             f.out());
  auto reqs = s.server.requests();
  BOOST_REQUIRE(reqs.size() == 3u);  // b was not resent
  BOOST_TEST(s.server.connections() == 1);
}

// The reader itself times out: it gives the role to the call still waiting,
// which then reads the reader's late reply (dropped) and its own.
BOOST_AUTO_TEST_CASE(reader_times_out_and_hands_off) {
  fake_rpc_options o;
  o.answer = slow_answer(1000ms);
  rpc_setup s{o, sharing()};
  auto f = s.kernel.run(
    "import os, threading, time\n"
    "from mibyan_tools import read_file\n"
    "res = {}\n"
    "def lead():\n"
    "    t0 = time.monotonic()\n"
    "    try:\n"
    "        read_file('slow-a')\n"
    "    except TimeoutError as e:\n"
    "        res['a'] = (str(e).startswith(\n"
    "            \"mibyan_tools: no reply to 'read_file' within 0.4s;\"),\n"
    "            time.monotonic() - t0 < 0.9)\n"
    "os.environ['MIBYAN_RPC_TIMEOUT'] = '0.4'\n"
    "t = threading.Thread(target=lead)\n"
    "t.start()\n"
    "time.sleep(0.1)\n"
    "os.environ['MIBYAN_RPC_TIMEOUT'] = '5'\n"
    "t0 = time.monotonic()\n"
    "b = read_file('b')['args']['path']\n"
    "took = time.monotonic() - t0\n"
    "t.join()\n"
    "print(res['a'], b, 0.6 < took < 3)\n",
    30s);
  BOOST_REQUIRE(f.ok);
  BOOST_TEST(f.status() == "ok", f.trace());
  BOOST_TEST(f.out() == "(True, True) b True\n",
             f.out());
  BOOST_TEST(s.server.requests().size() == 2u);
}

// Four calls in flight on one connection when the host goes away: each gets
// the outcome-unknown error and none is sent again (a new server listening
// on the same path sees nothing until the next call).
BOOST_AUTO_TEST_CASE(drop_with_four_in_flight_fails_all_four_once) {
  temp_dir sock_dir;
  auto path = sock_dir / "rpc.sock";
  fake_rpc_options o;
  o.token = "secret-token";
  o.hold = 5;  // never answered
  auto server = std::make_unique<fake_rpc_server>(path, o);
  kernel_harness_options ko;
  ko.rpc_socket = path;
  ko.rpc_token = "secret-token";
  ko.rpc_timeout = 20;
  kernel_harness kernel{sharing(ko)};
  auto cell = std::async(std::launch::async, [&] {
    return kernel.run(
      "import threading\n"
      "from mibyan_tools import write_file\n"
      "errs = []\n"
      "def call(i):\n"
      "    try:\n"
      "        write_file('f%d' % i, 'x')\n"
      "        errs.append('returned')\n"
      "    except ConnectionError as e:\n"
      "        errs.append(str(e))\n"
      "ts = [threading.Thread(target=call, args=(i,)) for i in range(4)]\n"
      "for t in ts:\n"
      "    t.start()\n"
      "for t in ts:\n"
      "    t.join()\n"
      "for e in errs:\n"
      "    print(e)\n",
      60s);
  });
  auto until = std::chrono::steady_clock::now() + 20s;
  while (server->requests().size() < 4u
         && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(10ms);
  auto reqs = server->requests();
  BOOST_REQUIRE(reqs.size() == 4u);
  for (auto& r : reqs)
    BOOST_TEST(r.connection == 1);
  server.reset();  // shuts every connection down
  fake_rpc_options o2;
  o2.token = "secret-token";
  fake_rpc_server second{path, o2};
  auto f = cell.get();
  BOOST_REQUIRE(f.ok);
  BOOST_TEST(f.status() == "ok", f.trace());
  std::string lost = "mibyan_tools: connection lost after 'write_file' was "
                     "sent; outcome unknown \xe2\x80\x94 check the effect "
                     "before retrying.\n";
  BOOST_TEST(f.out() == lost + lost + lost + lost, f.out());
  std::this_thread::sleep_for(300ms);
  BOOST_TEST(second.requests().empty());
  BOOST_TEST(second.connections() == 0);
  // The next call connects afresh.
  auto g = kernel.run("from mibyan_tools import read_file\n"
                      "print(read_file('next')['args']['path'])");
  BOOST_TEST(g.out() == "next\n", g.trace());
  BOOST_TEST(second.requests().size() == 1u);
  BOOST_TEST(second.connections() == 1);
}

// Replies larger than the read buffer, interleaved with small ones and out
// of order, arrive whole.
BOOST_AUTO_TEST_CASE(large_replies_out_of_order_arrive_whole) {
  fake_rpc_options o;
  o.hold = 4;
  o.answer = [](const fake_rpc_request& r) -> std::string {
    auto args = r.msg.find("args");
    auto n = args != nullptr ? args->get_int("limit", 0) : 0;
    json::value v = json::value::make_object();
    v["content"] = std::string(static_cast<size_t>(n), 'x');
    v["n"] = n;
    return v.dump();
  };
  kernel_harness_options ko;
  ko.rpc_timeout = 20;
  rpc_setup s{o, ko};
  auto f = s.kernel.run(
    "from concurrent.futures import ThreadPoolExecutor\n"
    "from mibyan_tools import read_file\n"
    "sizes = [3 << 20, 10, 200000, 1]\n"
    "with ThreadPoolExecutor(4) as pool:\n"
    "    res = list(pool.map(lambda n: read_file('f', limit=n), sizes))\n"
    "    again = list(pool.map(lambda n: read_file('f', limit=n),\n"
    "                          [5, 1, 2, 3]))\n"
    "print([r['n'] == n and len(r['content']) == n\n"
    "       for r, n in zip(res, sizes)])\n"
    "print(again[0]['content'], [r['n'] for r in again])\n",
    60s);
  BOOST_REQUIRE(f.ok);
  BOOST_TEST(f.status() == "ok", f.trace());
  BOOST_TEST(f.out() == "[True, True, True, True]\nxxxxx [5, 1, 2, 3]\n",
             f.out());
}

BOOST_AUTO_TEST_SUITE_END()
