// Benchmarks the execute_code bridge against bare-Python baselines measured
// in the same run:
// 1. per-call overhead of an in-script tool call (1,000 no-op calls in one
//    cell) vs. a Python newline-JSON echo server and client over a Unix
//    socket (bench/echo_server.py), and vs. the real stub against that
//    server (which isolates the C++ broker); in the same run, real
//    built-in tools from a script (read_file of a 1-line file, patch of a
//    1-line file - on MIBYAN_BENCH_TMPFS too when set), a no-op through the
//    blocking pool, and the bare costs of spawning an event-based actor
//    with one request and of one blocking-pool hand-off;
// 2. warm cell round trip (`pass` on a warm kernel) vs. a direct in-process
//    tool call through the same runtime, plus a Python pipe echo, and a
//    split of the direct call (dispatch_tool, one blocking-pool hop, the
//    actor path);
// 3. cold start to first result of a new session, without and with the
//    pre-started kernel pool, with python3 from PATH and the resolved
//    interpreter, vs. `python3 -c "print(1)"`, plus the time spawn_kernel
//    blocks the kernel registry;
// 4. 16 concurrent 100 ms tool calls from one script (ThreadPoolExecutor)
//    vs. 16 sequential ones.
// The in-script no-op is a `web_search` replacement returning at once; the
// 100 ms call is a `web_extract` replacement (both passed as extra tools,
// which replace the core tools of the same name). code_execution.
// max_tool_calls is raised to 5000 for the 1,000-call cell. Baselines and
// our measurements alternate repetition by repetition, so load from other
// processes on a small machine hits both alike; sections print medians and
// the final table shows ours / baseline.
//
// Usage: mibyan_exec_bench [repetitions | --quick] [--only SECTION]
//                          [--cells N]   (default 5 repetitions)
// --quick: 2 repetitions, fewer warm cells, two cold-start configurations.
// Prints BENCH_ROW lines (bench/bench_row.hpp) for scripts/bench.sh.
// Run from anywhere; bench/echo_server.py is found through the source dir
// compiled in (MIBYAN_BENCH_DIR).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <csignal>

#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "caf/all.hpp"
#include "caf/io/all.hpp"

#include "config/options.hpp"
#include "kernels/kernel_process.hpp"
#include "kernels/stub_generator.hpp"
#include "bench/bench_row.hpp"
#include "bench/bench_util.hpp"
#include "base/blocking_pool.hpp"
#include "base/env_filter.hpp"
#include "runtime/runtime.hpp"
#include "base/subprocess.hpp"
#include "tools/registry.hpp"
#include "tools/script_specs.hpp"
#include "tools/tool.hpp"
#include "base/strings.hpp"

#ifndef MIBYAN_BENCH_DIR
#define MIBYAN_BENCH_DIR "bench"
#endif


namespace fs = std::filesystem;
using namespace mibyan;
using namespace mibyan::bench;

namespace {

bool quick_run = false; // --quick

// -- statistics ---------------------------------------------------------------

std::string fmt(double v, int prec = 2) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", prec, v);
  return buf;
}

std::string list(const std::vector<double>& xs, int prec = 1) {
  std::string out;
  for (auto x : xs)
    out += (out.empty() ? "" : " ") + fmt(x, prec);
  return out;
}

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "exec_bench: %s\n", msg.c_str());
  std::exit(1);
}

// -- tools --------------------------------------------------------------------

// Replaces web_search: answers at once with an empty result.
class noop_search_tool final : public tool {
public:
  const char* name() const override { return "web_search"; }
  const char* toolset() const override { return "web"; }
  std::string description() const override { return "bench no-op"; }
  // Callable from scripts, like the built-in tool it replaces.
  script_policy script() const override { return {true, {}, ""}; }
  // Runs in its invocation actor's handler on the I/O thread
  // (docs/execute_code.md, "Script tool calls"), like a host tool declared
  // non_blocking; read_file below measures the route built-in tools take.
  bool non_blocking() const override { return true; }
  json::value schema() const override {
    return *json::parse(R"({"type":"object","properties":{
      "query":{"type":"string"},"limit":{"type":"integer"}},
      "required":["query"]})").v;
  }
  json::value run(const json::value&, const tool_context&) const override {
    return *json::parse(R"({"data":{"web":[]}})").v;
  }
};

// Replaces search_files: the same no-op, but not declared non-blocking, so
// script calls take the blocking-pool path.
class noop_pool_tool final : public tool {
public:
  const char* name() const override { return "search_files"; }
  const char* toolset() const override { return "file"; }
  std::string description() const override { return "bench pool no-op"; }
  // Callable from scripts, like the built-in tool it replaces.
  script_policy script() const override { return {true, {}, ""}; }
  json::value schema() const override {
    return *json::parse(R"({"type":"object","properties":{
      "pattern":{"type":"string"}},"required":["pattern"]})").v;
  }
  json::value run(const json::value&, const tool_context&) const override {
    return *json::parse(R"({"data":{"web":[]}})").v;
  }
};

// Replaces web_extract: sleeps 100 ms, polling the cancel flag.
class sleep_extract_tool final : public tool {
public:
  const char* name() const override { return "web_extract"; }
  const char* toolset() const override { return "web"; }
  std::string description() const override { return "bench 100 ms sleep"; }
  // Callable from scripts, like the built-in tool it replaces.
  script_policy script() const override { return {true, {}, ""}; }
  json::value schema() const override {
    return *json::parse(R"({"type":"object","properties":{
      "urls":{"type":"array","items":{"type":"string"}},
      "char_limit":{"type":"integer"}},"required":["urls"]})").v;
  }
  json::value run(const json::value&,
                  const tool_context& ctx) const override {
    auto until = clock_type::now() + std::chrono::milliseconds{100};
    for (auto now = clock_type::now(); now < until; now = clock_type::now()) {
      if (ctx.is_cancelled())
        return error_result("cancelled");
      std::this_thread::sleep_for(
        std::min<clock_type::duration>(until - now,
                                       std::chrono::milliseconds{5}));
    }
    return *json::parse(R"({"results":[]})").v;
  }
};

// -- processes ----------------------------------------------------------------

std::string capture(const std::vector<std::string>& argv) {
  subprocess_options so;
  so.argv = argv;
  so.merge_stderr = false;
  so.timeout = std::chrono::seconds(120);
  auto r = run_subprocess(so);
  if (!r.spawn_error.empty() || r.exit_code != 0)
    die("command failed: " + argv[0] + " " + (argv.size() > 1 ? argv[1] : "")
        + ": " + r.spawn_error + r.err());
  return r.out();
}

std::string which(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream ss{path ? path : ""};
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    auto candidate = (dir.empty() ? std::string{"."} : dir) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0)
      return candidate;
  }
  return "";
}

bool is_script(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[2] = {0, 0};
  in.read(magic, 2);
  return magic[0] == '#' && magic[1] == '!';
}

// A child Python echoing JSON lines over pipes; times line round trips.
double pipe_echo_p50_ms(const std::string& python, const std::string& script,
                        int n, double* p99) {
  int to_child[2], from_child[2];
  if (::pipe2(to_child, O_CLOEXEC) != 0 || ::pipe2(from_child, O_CLOEXEC) != 0)
    die("pipe failed");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, to_child[0], 0);
  posix_spawn_file_actions_adddup2(&fa, from_child[1], 1);
  std::vector<std::string> args{python, "-u", script, "pipe"};
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid;
  if (posix_spawnp(&pid, python.c_str(), &fa, nullptr, argv.data(), environ)
      != 0)
    die("cannot run " + python);
  posix_spawn_file_actions_destroy(&fa);
  ::close(to_child[0]);
  ::close(from_child[1]);
  std::vector<double> samples;
  std::string buf;
  for (int i = 0; i < n + 10; ++i) {
    auto line = "{\"id\":\"4242-" + std::to_string(i)
                + "\",\"code\":\"pass\",\"timeout\":300.0}\n";
    auto start = clock_type::now();
    if (::write(to_child[1], line.data(), line.size())
        != static_cast<ssize_t>(line.size()))
      die("pipe write failed");
    for (;;) {
      auto nl = buf.find('\n');
      if (nl != std::string::npos) {
        buf.erase(0, nl + 1);
        break;
      }
      char chunk[4096];
      auto got = ::read(from_child[0], chunk, sizeof chunk);
      if (got <= 0)
        die("pipe echo died");
      buf.append(chunk, static_cast<size_t>(got));
    }
    if (i >= 10)
      samples.push_back(ms_since(start));
  }
  ::close(to_child[1]);
  ::close(from_child[0]);
  int status;
  waitpid(pid, &status, 0);
  *p99 = percentile(samples, 0.99);
  return median(samples);
}

// -- runtime ------------------------------------------------------------------

struct bench_env {
  fs::path tmp;
  std::string python_path;   // what python3 on PATH resolves to
  std::string python_real;   // sys.executable
  std::string echo_script;
  int runtimes = 0;
};

std::unique_ptr<runtime> make_runtime(bench_env& env, int64_t prestart,
                                      const std::string& python,
                                      const std::string& sandbox = "auto") {
  options opts;
  opts.code_execution.sandbox = sandbox;
  opts.home = (env.tmp / ("home" + std::to_string(env.runtimes++))).string();
  opts.code_execution.prestart_kernels = prestart;
  opts.code_execution.python = python;
  opts.code_execution.max_tool_calls = 5000;
  opts.approvals.unattended_mode = "approve"; // docs/approvals.md
  // For A/B runs of the I/O loop's polling window (docs/benchmarks-history.md,
  // "Fourth round"); the default otherwise.
  if (auto* spin = std::getenv("MIBYAN_BENCH_IO_SPIN_US"))
    opts.runtime.io_spin_us = std::atoll(spin);
  std::vector<std::unique_ptr<tool>> extra;
  extra.push_back(std::make_unique<noop_search_tool>());
  extra.push_back(std::make_unique<sleep_extract_tool>());
  extra.push_back(std::make_unique<noop_pool_tool>());
  std::string err;
  auto rt = create_runtime(opts, std::move(extra));
  if (!rt)
    die("create_runtime: " + rt.error);
  return std::move(*rt);
}

struct exec_out {
  double wall_ms = 0;
  int64_t kernel_us = 0;   // tool_outcome.duration_us (line out -> frame in)
  json::value result;
  std::string output;
};

exec_out exec(runtime& rt, const std::string& session,
              const std::string& code) {
  static int seq = 0;
  json::value args;
  args["code"] = code;
  auto start = clock_type::now();
  auto out = rt.call_tool({session, "c" + std::to_string(++seq),
                           "execute_code", args.dump(), ""});
  exec_out r;
  r.wall_ms = ms_since(start);
  r.kernel_us = out.duration_us;
  auto parsed = json::parse(out.result_json);
  if (!parsed || parsed.v->get_string("status") != "success")
    die("execute_code failed: " + out.result_json);
  r.result = *parsed.v;
  r.output = r.result.get_string("output");
  return r;
}

double number_in(const std::string& output) {
  return std::strtod(output.c_str(), nullptr);
}

// -- table --------------------------------------------------------------------

struct row {
  std::string metric, ours, base, ratio, goal;
};

std::vector<row> table;

// Adds a row to the printed table and prints its BENCH_ROW line
// (bench/bench_row.hpp); `met` is null for an informational row.
void add_row(std::string metric, double ours, double base, std::string unit,
             std::string base_name, std::string goal,
             std::optional<bool> met = std::nullopt) {
  bench_row("exec: " + metric, ours, base, unit,
            goal + " (baseline: " + base_name + ")", met);
  table.push_back({std::move(metric), fmt(ours) + " " + unit,
                   fmt(base) + " " + unit + " (" + base_name + ")",
                   base > 0 ? fmt(ours / base) + "x" : "-", std::move(goal)});
}

// -- sections -----------------------------------------------------------------

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

void direct_call_breakdown(double direct_p50_ms);

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
    = "import time, threading\n"
      "from mibyan_tools import web_search\n"
      "def loop(n):\n"
      "    for _ in range(n):\n"
      "        r = web_search('x')\n"
      "        assert 'data' in r, r\n"
      "t = time.perf_counter()\n"
      "c = time.process_time()\n"
      "loop(800)\n"
      "one = 800 / (time.perf_counter() - t)\n"
      "cpu1 = (time.process_time() - c) * 1e6 / 800\n"
      "ts = [threading.Thread(target=loop, args=(100,)) for _ in range(8)]\n"
      "t = time.perf_counter()\n"
      "c = time.process_time()\n"
      "for x in ts: x.start()\n"
      "for x in ts: x.join()\n"
      "eight = 800 / (time.perf_counter() - t)\n"
      "cpu8 = (time.process_time() - c) * 1e6 / 800\n"
      "print(one, eight, cpu1, cpu8)\n";
  // Where the time goes: CPU per call of the kernel process (all its
  // threads; Python holds the GIL for most of it) and of this process
  // (the broker and everything else), against the wall time per call.
  std::vector<double> one, eight, ratio, py1, py8, host;
  for (int i = 0; i < reps; ++i) {
    rusage before{}, after{};
    ::getrusage(RUSAGE_SELF, &before);
    auto r = exec(rt, "threads", code);
    ::getrusage(RUSAGE_SELF, &after);
    if (r.result["tool_calls_made"].as_int() != 1600)
      die("expected 1600 tool calls: " + r.result.dump());
    std::istringstream in(r.output);
    double a = 0, b = 0, c1 = 0, c8 = 0;
    in >> a >> b >> c1 >> c8;
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
  std::printf("bound on the ratio from CPU on 2 cores: wall/call of one "
              "thread / max(kernel CPU, (kernel + host CPU) / 2) = %.2f\n",
              (1e6 / median(one))
                / std::max(median(py8), (median(py8) + median(host)) / 2));
  add_row("8 threads x no-op calls, throughput", median(eight), median(one),
          "calls/s", "one thread", ">= 4x one thread",
          median(eight) >= 4 * median(one));
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
  add_row("8 threads vs one, plain client + py echo (no bridge)",
          median(plain_eight), median(plain_one), "calls/s",
          "one thread", "info: the ceiling Python threads allow", {});
}

void warm_cell(bench_env& env, runtime& rt, int n) {
  std::printf("\n## 2. Warm cell round trip (%d x `pass`)\n", n);
  for (int i = 0; i < 20; ++i)
    exec(rt, "warm", "pass");
  for (int i = 0; i < 20; ++i)
    rt.call_tool({"warm", "d", "web_search", R"({"query":"x"})", ""});
  // Alternate a warm cell and a direct no-op call.
  std::vector<double> wall, kernel, outside, direct;
  for (int i = 0; i < n; ++i) {
    auto r = exec(rt, "warm", "pass");
    if (!r.result["kernel"]["reused"].as_bool())
      die("warm cell did not reuse its kernel");
    wall.push_back(r.wall_ms);
    kernel.push_back(static_cast<double>(r.kernel_us) / 1000.0);
    outside.push_back(r.wall_ms - static_cast<double>(r.kernel_us) / 1000.0);
    auto start = clock_type::now();
    auto out = rt.call_tool({"warm", "d", "web_search", R"({"query":"x"})",
                             ""});
    direct.push_back(ms_since(start));
    if (out.result_json.find("\"data\"") == std::string::npos)
      die("direct web_search failed: " + out.result_json);
  }
  // The same cells from an event-based caller: each cell's completion
  // (call_tool_async's callback, on a runtime thread) issues the next one;
  // no thread blocks. And call_tool_async + a future (a thin blocking
  // wrapper). The event-based rows carry goals, p99 among them: with 200
  // samples a p99 is the second-largest one, so that chain (and its pipe
  // echo baseline) takes at least 1,000 cells outside --quick.
  const int tail_n = quick_run ? n : std::max(n, 1000);
  std::vector<double> evented, wrapped;
  {
    struct chain {
      runtime* rt;
      int left;
      std::vector<double>* out;
      clock_type::time_point start;
      std::promise<void> done;
      json::value args;
      void next() {
        start = clock_type::now();
        rt->call_tool_async({"warm", "e", "execute_code", args.dump(), ""},
                            [this](tool_outcome o) {
          out->push_back(ms_since(start));
          if (o.result_json.find("\"success\"") == std::string::npos)
            die("event-based warm cell failed: " + o.result_json);
          if (--left > 0)
            next();
          else
            done.set_value();
        });
      }
    };
    chain c{&rt, tail_n, &evented, {}, {}, {}};
    c.args["code"] = "pass";
    auto f = c.done.get_future();
    c.next();
    f.wait();
    for (int i = 0; i < n; ++i) {
      json::value args;
      args["code"] = "pass";
      std::promise<tool_outcome> p;
      auto fo = p.get_future();
      auto start = clock_type::now();
      rt.call_tool_async({"warm", "w", "execute_code", args.dump(), ""},
                         [&p](tool_outcome o) { p.set_value(std::move(o)); });
      fo.wait();
      wrapped.push_back(ms_since(start));
    }
  }
  double pipe_p99 = 0;
  auto pipe_p50 = pipe_echo_p50_ms(env.python_real, env.echo_script, tail_n,
                                   &pipe_p99);
  std::printf("ours wall       p50 %.3f  p99 %.3f ms\n", median(wall),
              percentile(wall, 0.99));
  std::printf("  kernel part   p50 %.3f  p99 %.3f ms (cell line written -> "
              "frame parsed, in the kernel actor)\n", median(kernel),
              percentile(kernel, 0.99));
  std::printf("  routing part  p50 %.3f  p99 %.3f ms (wall - kernel: "
              "scoped_actor, dispatcher, registry, JSON)\n", median(outside),
              percentile(outside, 0.99));
  std::printf("direct no-op    p50 %.3f  p99 %.3f ms (call_tool web_search)\n",
              median(direct), percentile(direct, 0.99));
  std::printf("py pipe echo    p50 %.3f  p99 %.3f ms (C++ <-> python line "
              "echo over pipes)\n", pipe_p50, pipe_p99);
  add_row("warm `pass` cell p50 (blocking call_tool)", median(wall),
          median(direct), "ms", "direct no-op call_tool", "info");
  add_row("warm `pass` cell p99 (blocking call_tool)",
          percentile(wall, 0.99), percentile(direct, 0.99), "ms",
          "direct no-op call_tool", "info");
  std::printf("event-based     p50 %.3f  p99 %.3f ms (call_tool_async "
              "chained from its callback)\n", median(evented),
              percentile(evented, 0.99));
  std::printf("async + future p50 %.3f  p99 %.3f ms\n", median(wrapped),
              percentile(wrapped, 0.99));
  add_row("warm `pass` cell p50 (event-based caller)", median(evented),
          pipe_p50, "ms", "py pipe echo", "< 0.08 ms",
          median(evented) < 0.08);
  add_row("warm `pass` cell p99 (event-based caller)",
          percentile(evented, 0.99), pipe_p99, "ms", "py pipe echo",
          "< 0.3 ms", percentile(evented, 0.99) < 0.3);
  add_row("warm `pass` cell p50 (call_tool_async + future)", median(wrapped),
          median(wall), "ms", "blocking call_tool", "info");
  add_row("warm `pass` cell p50 vs pipe echo", median(wall), pipe_p50, "ms",
          "py pipe echo", "info");
  direct_call_breakdown(median(direct));
}

// Splits a direct call_tool into parts that can be timed without CAF:
// dispatch_tool itself (validation + run) and one blocking-pool hop; the
// rest of the direct call is the actor path (scoped_actor, dispatcher, a
// tool_invocation actor per call, messages).
void direct_call_breakdown(double direct_p50_ms) {
  std::printf("\n## 2b. Where a direct no-op call's time goes\n");
  options cfg;
  tool_registry reg;
  reg.add(std::make_unique<noop_search_tool>());
  std::atomic<bool> cancel{false};
  tool_context ctx;
  ctx.cfg = &cfg;
  ctx.cancelled = &cancel;
  ctx.cwd = "/";
  const int n = 20000;
  auto start = clock_type::now();
  for (int i = 0; i < n; ++i) {
    auto r = dispatch_tool(reg, "web_search",
                           std::string_view{R"({"query":"x"})"}, ctx);
    if (r.find("data") == nullptr)
      die("dispatch_tool(noop) failed: " + r.dump());
  }
  auto dispatch_us = ms_since(start) * 1000.0 / n;
  blocking_pool pool(16);
  std::vector<double> hop;
  for (int i = 0; i < 2100; ++i) {
    std::promise<void> done;
    auto f = done.get_future();
    auto t0 = clock_type::now();
    pool.submit([&] { done.set_value(); });
    f.wait();
    if (i >= 100)
      hop.push_back(ms_since(t0) * 1000.0);
  }
  auto hop_us = median(hop);
  std::printf("dispatch_tool(no-op) in-thread:        %.2f us\n",
              dispatch_us);
  std::printf("blocking_pool submit -> run -> wake:   p50 %.2f us\n", hop_us);
  std::printf("direct call_tool p50:                  %.2f us\n",
              direct_p50_ms * 1000);
  std::printf("  => actor path (rest):                %.2f us\n",
              direct_p50_ms * 1000 - dispatch_us - hop_us);
}

void cold_start(bench_env& env, int reps) {
  std::printf("\n## 3. Cold start to first result (new session, print(1))\n");
  // What a refill costs the kernel registry: spawn_kernel runs inside its
  // handler, so a reply routed through the registry waits for it.
  for (auto* py : {&env.python_path, &env.python_real}) {
    std::vector<double> t;
    for (int i = 0; i < reps; ++i) {
      kernel_spawn_options so;
      so.python = *py;
      so.cwd = env.tmp.string();
      so.tools = core_script_tool_names();
      so.specs = core_script_specs();
      so.inherited_env = current_environment();
      auto start = clock_type::now();
      auto spawned = spawn_kernel(so);
      t.push_back(ms_since(start));
      if (!spawned)
        die("spawn_kernel: " + spawned.error);
      auto& k = *spawned;
      signal_kernel(k.pid, SIGKILL);
      int status;
      ::waitpid(k.pid, &status, 0);
      close_kernel_fds(k);
      remove_staging_dir(k.staging_dir);
    }
    std::printf("spawn_kernel() (%s) blocks its caller: %s ms\n",
                py->c_str(), list(t, 2).c_str());
  }
  // The same with the kernel inside bubblewrap (the default where it
  // works) and without it (code_execution.sandbox: off).
  for (auto* py : {&env.python_real}) {
    for (bool sandboxed : {false, true}) {
      if (sandboxed && !probe_sandbox().available)
        continue;
      std::vector<double> t;
      for (int i = 0; i < reps; ++i) {
        kernel_spawn_options so;
        so.python = *py;
        so.cwd = env.tmp.string();
        so.tools = core_script_tool_names();
      so.specs = core_script_specs();
        so.inherited_env = current_environment();
        if (sandboxed)
          so.bwrap = probe_sandbox().bwrap;
        auto start = clock_type::now();
        auto spawned = spawn_kernel(so);
        t.push_back(ms_since(start));
        if (!spawned)
          die("spawn_kernel: " + spawned.error);
        auto& k = *spawned;
        signal_kernel(k.pid, SIGKILL);
        int status;
        ::waitpid(k.pid, &status, 0);
        close_kernel_fds(k);
        remove_staging_dir(k.staging_dir);
      }
      std::printf("spawn_kernel() (%s, %s) blocks its caller: %s ms\n",
                  py->c_str(), sandboxed ? "bwrap" : "no sandbox",
                  list(t, 2).c_str());
    }
  }
  struct config {
    const char* label;
    int64_t prestart;
    bool real;
    const char* sandbox = "auto";
  };
  for (auto cfg : {config{"pool 0, python3 (PATH)", 0, false},
                   config{"pool 0, resolved python", 0, true},
                   config{"pool 0, resolved, no sandbox", 0, true, "off"},
                   config{"pool 1, python3 (PATH)", 1, false},
                   config{"pool 1, resolved python", 1, true},
                   config{"pool 1, resolved, no sandbox", 1, true, "off"}}) {
    if (quick_run && !(cfg.real && std::string{cfg.sandbox} == "auto"))
      continue;
    auto rt = make_runtime(env, cfg.prestart,
                           cfg.real ? env.python_real : std::string{},
                           cfg.sandbox);
    auto python = cfg.real ? env.python_real : std::string{"python3"};
    std::vector<double> wall, base, kernel;
    std::this_thread::sleep_for(std::chrono::seconds(1));
    for (int i = 0; i < reps; ++i) {
      base.push_back(spawn_to_null({python, "-c", "print(1)"}));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      auto session = "cold-" + std::to_string(i);
      auto r = exec(*rt, session, "print(1)");
      if (r.output != "1\n" || r.result["kernel"]["reused"].as_bool())
        die("unexpected cold result: " + r.result.dump());
      wall.push_back(r.wall_ms);
      kernel.push_back(static_cast<double>(r.kernel_us) / 1000.0);
      rt->close_session(session);
      // Let the old kernel die and the pool refill (a spare kernel needs its
      // interpreter started, which the shim makes slow).
      std::this_thread::sleep_for(std::chrono::milliseconds(
        cfg.prestart > 0 ? 1000 : 300));
    }
    std::printf("%-26s %s ms (%s -c print(1): %s ms)\n", cfg.label,
                list(wall).c_str(), python.c_str(), list(base).c_str());
    std::printf("%-26s of which cell line written -> frame: %s "
                "ms\n", "", list(kernel).c_str());
    std::printf("%-26s stats %s\n", "", rt->kernel_stats().c_str());
    add_row(std::string{"cold start, "} + cfg.label, median(wall),
            median(base), "ms",
            cfg.real ? "resolved -c print(1)" : "python3 -c print(1)",
            cfg.prestart > 0 ? "< 10 ms" : "info",
            cfg.prestart > 0 ? std::optional<bool>{median(wall) < 10}
                             : std::nullopt);
  }
}

void concurrency(runtime& rt, int reps) {
  std::printf("\n## 4. Concurrent 100 ms tool calls from one script\n");
  auto code = [](int n, bool parallel) {
    std::string c = "import time, concurrent.futures as cf\n"
                    "from mibyan_tools import web_extract\n"
                    "t = time.perf_counter()\n";
    if (parallel)
      c += "with cf.ThreadPoolExecutor(" + std::to_string(n) + ") as ex:\n"
           "    rs = list(ex.map(lambda i: web_extract(['u']), range("
           + std::to_string(n) + ")))\n";
    else
      c += "rs = [web_extract(['u']) for _ in range(" + std::to_string(n)
           + ")]\n";
    c += "assert all('results' in r for r in rs), rs\n"
         "print((time.perf_counter() - t) * 1000)\n";
    return c;
  };
  exec(rt, "conc", "from mibyan_tools import web_extract\nweb_extract(['u'])");
  std::vector<double> par, par_wall, seq, seq_wall;
  for (int i = 0; i < reps; ++i) {
    auto r = exec(rt, "conc", code(16, true));
    par.push_back(number_in(r.output));
    par_wall.push_back(r.wall_ms);
  }
  for (int i = 0; i < std::min(reps, 3); ++i) {
    auto r = exec(rt, "conc", code(16, false));
    seq.push_back(number_in(r.output));
    seq_wall.push_back(r.wall_ms);
  }
  auto r32 = exec(rt, "conc", code(32, true));
  std::printf("16 parallel, in-script ms:  %s (cell wall %s)\n",
              list(par).c_str(), list(par_wall).c_str());
  std::printf("16 sequential, in-script ms: %s (cell wall %s)\n",
              list(seq).c_str(), list(seq_wall).c_str());
  std::printf("32 parallel, in-script ms:  %s (blocking_threads = %lld)\n",
              std::string{strings::trim_right_view(
                  r32.output, strings::ascii_space)}.c_str(),
              static_cast<long long>(config_of(rt).runtime.blocking_threads));
  add_row("16 x 100 ms calls, ThreadPoolExecutor(16)", median(par),
          median(seq), "ms", "16 sequential", "< 2x one call (200 ms)",
          median(par) < 200);
  add_row("32 x 100 ms calls, ThreadPoolExecutor(32)",
          number_in(r32.output), median(par), "ms", "16 parallel",
          "info: pool of 16");
}

void print_table() {
  std::printf("\n| metric | ours | baseline | ratio | goal |\n");
  std::printf("|---|---|---|---|---|\n");
  for (auto& r : table)
    std::printf("| %s | %s | %s | %s | %s |\n", r.metric.c_str(),
                r.ours.c_str(), r.base.c_str(), r.ratio.c_str(),
                r.goal.c_str());
}

} // namespace

int main(int argc, char** argv) {
  quick_run = bench_quick(argc, argv);
  // --only SECTION (overhead, threads, warm, conc, cold): one section, for
  // profiling.
  std::string only;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string{argv[i]} == "--only")
      only = argv[i + 1];
  auto want = [&](const char* s) { return only.empty() || only == s; };
  // --cells N: warm cells per measurement (for profiling the warm path).
  int cells = quick_run ? 100 : 200;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string{argv[i]} == "--cells" && std::atoi(argv[i + 1]) > 0)
      cells = std::atoi(argv[i + 1]);
  int reps = quick_run ? 2
             : argc > 1 && std::atoi(argv[1]) > 0 ? std::atoi(argv[1]) : 5;
  auto total_start = clock_type::now();
  bench_env env;
  char tmpl[] = "/tmp/mibyan_exec_bench_XXXXXX";
  if (::mkdtemp(tmpl) == nullptr)
    die("mkdtemp failed");
  env.tmp = tmpl;
  env.echo_script = fs::absolute(fs::path{MIBYAN_BENCH_DIR}
                                 / "echo_server.py").string();
  if (!fs::exists(env.echo_script))
    die("missing " + env.echo_script);
  env.python_path = which("python3");
  if (env.python_path.empty())
    die("python3 is not on PATH");
  env.python_real = std::string{strings::trim_right_view(
    capture({"python3", "-c", "import sys; print(sys.executable)"}),
    strings::ascii_space)};
  std::error_code ec;
  auto resolved = fs::canonical(env.python_path, ec).string();
  std::printf("# execute_code bridge benchmark (%d repetitions)\n", reps);
  std::printf("python3 on PATH: %s -> %s (%s)\n", env.python_path.c_str(),
              resolved.c_str(),
              is_script(resolved) ? "a script, e.g. a pyenv shim"
                                  : "an executable");
  std::printf("resolved interpreter (sys.executable): %s\n",
              env.python_real.c_str());
  {
    auto rt = make_runtime(env, 1, env.python_real);
    std::this_thread::sleep_for(std::chrono::seconds(1));
    if (want("overhead"))
      per_call_overhead(env, *rt, reps);
    if (want("paths"))
      inline_vs_pool(*rt);
    if (want("threads"))
      threaded_calls(env, *rt, reps);
    if (want("warm"))
      warm_cell(env, *rt, cells);
    if (want("conc"))
      concurrency(*rt, reps);
  }
  if (want("cold"))
    cold_start(env, reps);
  print_table();
  std::printf("\ntotal bench time: %.1f s\n", ms_since(total_start) / 1000);
  fs::remove_all(env.tmp, ec);
  return 0;
}
