// Section 1 of the execute_code bridge benchmark (bench/exec_bench.cpp):
// what one in-script tool call costs. 1,000 no-op calls in one cell against
// a Python echo server and the real stub against it; real built-in tools
// from a script; a no-op through the blocking pool; the bare costs of an
// actor spawn and a pool hand-off; broker-thread against pool calls; and 8
// script threads calling at once. Rows go to the shared table
// (bench/exec_bench_support.hpp).
#include "bench/exec_bench_support.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <future>
#include <sstream>

#include <sys/resource.h>

#include "caf/all.hpp"
#include "caf/io/all.hpp"

#include "base/blocking_pool.hpp"
#include "kernels/stub_generator.hpp"
#include "tools/script_specs.hpp"

namespace fs = std::filesystem;

namespace mibyan::exec_bench {

using namespace mibyan::bench;

namespace {


// What an invocation actor and a pool hop cost by themselves, in this
// process and run: (a) spawning an event-based CAF actor that answers one
// request and quits, request and reply included, from a blocking caller;
// (b) one blocking_pool hand-off and back (submit, the job fulfils a
// promise the caller waits on). Per operation, median of 5 blocks of 2,000.
// (c) and (d): what an invocation per script call costs as the kernel broker
// sees it: from a broker on the I/O thread, spawn a child that sends one
// message back and quits, 2,000 times in a row; the child is a broker on
// the same I/O thread (how a script call's invocation is hosted,
// actors/tool_invocation.hpp) or an event-based actor on the scheduler.
struct actor_costs {
  double spawn_request_us = 0;
  double pool_round_trip_us = 0;
  double io_child_us = 0;
  double scheduled_child_us = 0;
};

struct spawn_driver_state {
  int left = 0;
  bool on_io = false;
  std::promise<void>* done = nullptr;
};

using spawn_driver = caf::io::stateful_broker<spawn_driver_state>;

void spawn_child(spawn_driver* self) {
  auto me = caf::actor_cast<caf::actor>(self);
  auto body = [me](auto* child) -> caf::behavior {
    caf::anon_send(me, 1);
    child->quit();
    return {};
  };
  if (self->state.on_io)
    self->system().middleman().spawn_broker(
      [body](caf::io::broker* c) { return body(c); });
  else
    self->spawn([body](caf::event_based_actor* c) { return body(c); });
}

double spawn_children_us(caf::actor_system& sys, bool on_io, int n) {
  std::promise<void> done;
  auto f = done.get_future();
  auto t0 = clock_type::now();
  sys.middleman().spawn_broker(
    [&done, on_io, n](spawn_driver* self) -> caf::behavior {
      self->state.left = n;
      self->state.on_io = on_io;
      self->state.done = &done;
      spawn_child(self);
      return {[self](int) {
        if (--self->state.left > 0) {
          spawn_child(self);
          return;
        }
        self->state.done->set_value();
        self->quit();
      }};
    });
  f.get();
  return ms_since(t0) * 1000.0 / n;
}

actor_costs measure_actor_costs() {
  caf::actor_system_config cfg;
  // The runtime's scheduler settings (runtime/runtime.cpp).
  cfg.set("scheduler.max-threads", size_t{2});
  cfg.set("scheduler.policy", caf::atom("sharing"));
  cfg.load<caf::io::middleman>();
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  constexpr int n = 2000;
  std::vector<double> spawn_blocks, pool_blocks, io_blocks, sched_blocks;
  blocking_pool pool{1};
  for (int block = 0; block < 5; ++block) {
    io_blocks.push_back(spawn_children_us(sys, true, n));
    sched_blocks.push_back(spawn_children_us(sys, false, n));
    auto t0 = clock_type::now();
    for (int i = 0; i < n; ++i) {
      auto a = sys.spawn([](caf::event_based_actor* me) -> caf::behavior {
        return {[me](int x) {
          me->quit();
          return x + 1;
        }};
      });
      self->request(a, caf::infinite, i)
        .receive([](int) {}, [](caf::error&) { die("actor request failed"); });
    }
    spawn_blocks.push_back(ms_since(t0) * 1000.0 / n);
    t0 = clock_type::now();
    for (int i = 0; i < n; ++i) {
      std::promise<int> done;
      auto f = done.get_future();
      if (!pool.submit([&done, i] { done.set_value(i); }))
        die("pool refused a job");
      f.get();
    }
    pool_blocks.push_back(ms_since(t0) * 1000.0 / n);
  }
  return {median(spawn_blocks), median(pool_blocks), median(io_blocks),
          median(sched_blocks)};
}

} // namespace

void per_call_overhead(bench_env& env, runtime& rt, int reps) {
  std::printf("\n## 1. Per-call overhead (1,000 no-op calls in one cell)\n");
  auto stub_path = (env.tmp / "mibyan_tools_bench_stub.py").string();
  {
    std::ofstream out(stub_path);
    out << generate_stub({"web_search"}, core_script_specs());
  }
  const std::string code
    = "import time\n"
      "from mibyan_tools import web_search\n"
      "t = time.perf_counter()\n"
      "for _ in range(1000):\n"
      "    r = web_search('x')\n"
      "assert 'data' in r, r\n"
      "print((time.perf_counter() - t) * 1e6 / 1000)\n";
  // The same no-op through the blocking pool (not declared non-blocking).
  const std::string pool_code
    = "import time\n"
      "from mibyan_tools import search_files\n"
      "t = time.perf_counter()\n"
      "for _ in range(1000):\n"
      "    r = search_files('x')\n"
      "assert 'data' in r, r\n"
      "print((time.perf_counter() - t) * 1e6 / 1000)\n";
  exec(rt, "overhead", "from mibyan_tools import web_search\n"
                       "for _ in range(100): web_search('warm')\n");
  // Baseline and ours alternate, so load from other processes on this
  // small machine hits both alike.
  std::vector<double> plain, stub, in_script, wall, pool_us;
  for (int i = 0; i < reps; ++i) {
    auto base = json::parse(capture({env.python_real, env.echo_script, "rpc",
                                     "1000", "1", stub_path}));
    if (!base || !base.v->is_object())
      die("echo_server.py rpc printed no JSON");
    plain.push_back((*base.v)["plain_us"].as_array().at(0).as_double());
    stub.push_back((*base.v)["stub_us"].as_array().at(0).as_double());
    auto r = exec(rt, "overhead", code);
    if (r.result["tool_calls_made"].as_int() != 1000)
      die("expected 1000 tool calls: " + r.result.dump());
    in_script.push_back(number_in(r.output));
    wall.push_back(r.wall_ms * 1000.0 / 1000);
    pool_us.push_back(number_in(exec(rt, "overhead", pool_code).output));
  }
  // A cheap real tool through the blocking pool: read_file of a small file.
  auto small = (env.tmp / "small.txt").string();
  std::ofstream(small) << "one line\n";
  const std::string read_code
    = "import time\n"
      "from mibyan_tools import read_file\n"
      "t = time.perf_counter()\n"
      "for _ in range(1000):\n"
      "    r = read_file('" + small + "')\n"
      "assert 'content' in r, r\n"
      "print((time.perf_counter() - t) * 1e6 / 1000)\n";
  std::vector<double> read_us;
  for (int i = 0; i < reps; ++i)
    read_us.push_back(number_in(exec(rt, "overhead", read_code).output));
  // A small edit through the blocking pool: patch (replace mode) of a
  // one-line file, flipping one word back and forth so every call edits.
  // patch writes durably (the file and its directory are fsynced), so the
  // row is measured on the bench's directory and, when MIBYAN_BENCH_TMPFS
  // names a tmpfs directory the file tools may write (not under /dev:
  // they refuse it), there too, where fsync costs nothing: the gap is the
  // disk.
  auto patch_run = [&](const fs::path& dir) {
    auto edited = (dir / "edit.txt").string();
    std::ofstream(edited) << "alpha\n";
    const std::string patch_code
      = "import time\n"
        "from mibyan_tools import patch\n"
        "p = '" + edited + "'\n"
        "t = time.perf_counter()\n"
        "for i in range(500):\n"
        "    a, b = ('alpha', 'beta') if i % 2 == 0 else ('beta', 'alpha')\n"
        "    r = patch(path=p, old_string=a, new_string=b)\n"
        "    assert 'error' not in r, r\n"
        "print((time.perf_counter() - t) * 1e6 / 500)\n";
    return number_in(exec(rt, "overhead", patch_code).output);
  };
  std::error_code shm_ec;
  const char* tmpfs = std::getenv("MIBYAN_BENCH_TMPFS");
  fs::path shm_dir = fs::path{tmpfs ? tmpfs : ""} / env.tmp.filename();
  bool have_shm = tmpfs != nullptr && *tmpfs != '\0'
                  && fs::create_directories(shm_dir, shm_ec);
  std::vector<double> patch_us, patch_shm_us;
  for (int i = 0; i < reps; ++i) {
    patch_us.push_back(patch_run(env.tmp));
    if (have_shm)
      patch_shm_us.push_back(patch_run(shm_dir));
  }
  if (have_shm)
    fs::remove_all(shm_dir, shm_ec);
  std::printf("ours, patch us/call (tmpfs):    %s\n",
              list(patch_shm_us).c_str());
  std::printf("ours, patch us/call (pool):     %s\n", list(patch_us).c_str());
  std::printf("ours, pool no-op us/call:       %s\n", list(pool_us).c_str());
  std::printf("ours, read_file us/call (pool): %s\n", list(read_us).c_str());
  std::printf("ours, in-script us/call:        %s\n", list(in_script).c_str());
  std::printf("ours, cell wall / 1000 (us):    %s\n", list(wall).c_str());
  std::printf("floor (plain client, py echo):  %s\n", list(plain).c_str());
  std::printf("stub client vs. py echo server: %s\n", list(stub).c_str());
  auto costs = measure_actor_costs();
  std::printf("spawn event-based actor + request/reply: %.2f us\n",
              costs.spawn_request_us);
  std::printf("blocking pool hand-off and back:          %.2f us\n",
              costs.pool_round_trip_us);
  auto floor = median(plain);
  add_row("spawn an event-based actor + one request", costs.spawn_request_us,
          floor, "us", "py echo floor", "info: invocation actor cost");
  std::printf("from the I/O thread, spawn + one message back: child on "
              "the I/O thread %.2f us, on the scheduler %.2f us\n",
              costs.io_child_us, costs.scheduled_child_us);
  add_row("invocation on the I/O thread: spawn + answer, from the kernel's "
          "thread", costs.io_child_us, costs.scheduled_child_us, "us",
          "the same child on the scheduler",
          "info: how a script call's invocation is hosted");
  add_row("blocking pool hand-off and back (no tool)",
          costs.pool_round_trip_us, floor, "us", "py echo floor",
          "info: pool hop cost");
  // A tool declaring non_blocking runs in its invocation actor's handler
  // on the I/O thread; no built-in tool declares it (host tools may), so
  // this row is the floor of the invocation actor, not a goal row: the
  // goal rows below use the route every built-in tool takes.
  add_row("no-op call, in-script (non_blocking host-tool route)",
          median(in_script), floor, "us", "py echo floor",
          "info: no built-in tool takes this route");
  add_row("no-op call, cell wall/1000", median(wall), floor, "us",
          "py echo floor", "info");
  add_row("no-op call via the blocking pool, in-script", median(pool_us),
          floor, "us", "py echo floor", "<= 1.25x floor",
          median(pool_us) <= 1.25 * floor);
  add_row("read_file of a 1-line file, in-script (blocking pool)",
          median(read_us), floor, "us", "py echo floor", "<= 1.25x floor",
          median(read_us) <= 1.25 * floor);
  add_row("patch of a 1-line file on disk, in-script (2 fsyncs)",
          median(patch_us), floor, "us", "py echo floor", "info: disk");
  if (have_shm)
    add_row("patch of a 1-line file on tmpfs, in-script (blocking pool)",
            median(patch_shm_us), floor, "us", "py echo floor",
            "<= 2x floor", median(patch_shm_us) <= 2 * floor);
  add_row("stub client vs py echo (no broker)", median(stub), floor, "us",
          "py echo floor", "info");
  add_row("no-op call, in-script vs stub+py echo", median(in_script),
          median(stub), "us", "stub+py echo", "info: broker cost");
}

// Inline (non-blocking tool) against blocking-pool no-op calls, in blocks
// of 100 alternating within one cell: per-call us, min and median of the
// blocks (min is the least disturbed by other load).
void inline_vs_pool(runtime& rt) {
  std::printf("\n## 1c. Broker-thread vs blocking-pool no-op (blocks of 100)\n");
  const std::string code
    = "import time\n"
      "from mibyan_tools import web_search, search_files\n"
      "a, b = [], []\n"
      "for _ in range(20):\n"
      "    t = time.perf_counter()\n"
      "    for _ in range(100): web_search('x')\n"
      "    a.append((time.perf_counter() - t) * 1e4)\n"
      "    t = time.perf_counter()\n"
      "    for _ in range(100): search_files('x')\n"
      "    b.append((time.perf_counter() - t) * 1e4)\n"
      "a.sort(); b.sort()\n"
      "print(a[0], a[10], b[0], b[10])\n";
  auto r = exec(rt, "paths", code);
  std::istringstream in(r.output);
  double amin = 0, amed = 0, bmin = 0, bmed = 0;
  in >> amin >> amed >> bmin >> bmed;
  std::printf("broker thread: min %.1f  median %.1f us/call\n", amin, amed);
  std::printf("blocking pool: min %.1f  median %.1f us/call\n", bmin, bmed);
}

// 8 threads of one script calling the no-op at once against the same
// script calling from one thread: throughput ratio (calls/s).
void threaded_calls(bench_env& env, runtime& rt, int reps) {
  std::printf("\n## 1b. 8 threads of one script calling at once\n");
  const std::string code
    = "import time, threading, resource\n"
      "from mibyan_tools import web_search\n"
      "def csw():\n"
      "    r = resource.getrusage(resource.RUSAGE_SELF)\n"
      "    return r.ru_nvcsw + r.ru_nivcsw\n"
      "def loop(n):\n"
      "    for _ in range(n):\n"
      "        r = web_search('x')\n"
      "        assert 'data' in r, r\n"
      "t = time.perf_counter()\n"
      "c = time.process_time()\n"
      "w = csw()\n"
      "loop(800)\n"
      "one = 800 / (time.perf_counter() - t)\n"
      "cpu1 = (time.process_time() - c) * 1e6 / 800\n"
      "csw1 = (csw() - w) / 800\n"
      "ts = [threading.Thread(target=loop, args=(100,)) for _ in range(8)]\n"
      "t = time.perf_counter()\n"
      "c = time.process_time()\n"
      "w = csw()\n"
      "for x in ts: x.start()\n"
      "for x in ts: x.join()\n"
      "eight = 800 / (time.perf_counter() - t)\n"
      "cpu8 = (time.process_time() - c) * 1e6 / 800\n"
      "csw8 = (csw() - w) / 800\n"
      "print(one, eight, cpu1, cpu8, csw1, csw8)\n";
  // Where the time goes: CPU per call of the kernel process (all its
  // threads; Python holds the GIL for most of it) and of this process
  // (the broker and everything else), against the wall time per call.
  std::vector<double> one, eight, ratio, py1, py8, host, sw1, sw8;
  for (int i = 0; i < reps; ++i) {
    rusage before{}, after{};
    ::getrusage(RUSAGE_SELF, &before);
    auto r = exec(rt, "threads", code);
    ::getrusage(RUSAGE_SELF, &after);
    if (r.result["tool_calls_made"].as_int() != 1600)
      die("expected 1600 tool calls: " + r.result.dump());
    std::istringstream in(r.output);
    double a = 0, b = 0, c1 = 0, c8 = 0, w1 = 0, w8 = 0;
    in >> a >> b >> c1 >> c8 >> w1 >> w8;
    sw1.push_back(w1);
    sw8.push_back(w8);
    one.push_back(a);
    eight.push_back(b);
    ratio.push_back(a > 0 ? b / a : 0);
    py1.push_back(c1);
    py8.push_back(c8);
    auto us = [](const timeval& t) { return t.tv_sec * 1e6 + t.tv_usec; };
    host.push_back((us(after.ru_utime) + us(after.ru_stime)
                    - us(before.ru_utime) - us(before.ru_stime)) / 1600);
  }
  std::printf("one thread, calls/s:    %s\n", list(one, 0).c_str());
  std::printf("8 threads, calls/s:     %s\n", list(eight, 0).c_str());
  std::printf("ratio:                  %s\n", list(ratio, 2).c_str());
  std::printf("kernel CPU us/call, 1 thread: %s; 8 threads: %s\n",
              list(py1).c_str(), list(py8).c_str());
  std::printf("host CPU us/call (both phases): %s\n", list(host).c_str());
  std::printf("kernel context switches/call, 1 thread: %s; 8 threads: %s\n",
              list(sw1, 2).c_str(), list(sw8, 2).c_str());
  std::printf("bound on the ratio from CPU on 2 cores: wall/call of one "
              "thread / max(kernel CPU, (kernel + host CPU) / 2) = %.2f\n",
              (1e6 / median(one))
                / std::max(median(py8), (median(py8) + median(host)) / 2));
  // What Python threads allow any bridge here: the plain client, one
  // connection per thread, against a Python echo server that serves all
  // connections at once (bench/echo_server.py threads).
  std::vector<double> plain_one, plain_eight, plain_ratio;
  auto r = json::parse(capture({env.python_real, env.echo_script, "threads",
                                "1600", std::to_string(reps)}));
  if (!r || !r.v->is_object())
    die("echo_server.py threads printed no JSON");
  for (int i = 0; i < reps; ++i) {
    auto a = (*r.v)["one"].as_array().at(i).as_double();
    auto b = (*r.v)["eight"].as_array().at(i).as_double();
    plain_one.push_back(a);
    plain_eight.push_back(b);
    plain_ratio.push_back(a > 0 ? b / a : 0);
  }
  std::printf("plain client + py echo, one thread, calls/s: %s\n",
              list(plain_one, 0).c_str());
  std::printf("plain client + py echo, 8 threads, calls/s:  %s\n",
              list(plain_eight, 0).c_str());
  std::printf("plain client + py echo, ratio:               %s\n",
              list(plain_ratio, 2).c_str());
  auto column = [&](const char* key, int digits) {
    std::vector<double> xs;
    for (auto& x : (*r.v)[key].as_array())
      xs.push_back(x.as_double());
    return list(xs, digits);
  };
  std::printf("plain client CPU us/call, 1 thread: %s; 8 threads: %s\n",
              column("cpu1", 1).c_str(), column("cpu8", 1).c_str());
  std::printf("plain client context switches/call, 1 thread: %s; 8 threads: "
              "%s\n",
              column("csw1", 2).c_str(), column("csw8", 2).c_str());
  add_row("8 threads vs one, plain client + py echo (no bridge)",
          median(plain_eight), median(plain_one), "calls/s",
          "one thread", "info: the ceiling Python threads allow", {});
  // Goal 7 of the performance round: 8 script threads against what the
  // plain client reaches with 8 threads in the same run ("8 threads >= 4x
  // one thread" is retired: CPython on 2 cores cannot reach it).
  add_row("8 threads x no-op calls, throughput", median(eight),
          median(plain_eight), "calls/s", "plain client + py echo, 8 threads",
          ">= 0.9x the plain client's 8 threads",
          median(eight) >= 0.9 * median(plain_eight));
  add_row("8 threads x no-op calls vs one thread", median(eight), median(one),
          "calls/s", "one thread", "info", {});
}

} // namespace mibyan::exec_bench
