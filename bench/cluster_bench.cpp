// Cluster benchmark (docs/cluster.md, docs/benchmarks-history.md "Cluster"):
// 1. a direct tool call on a remote worker (a `mibyan node` process on
//    loopback) against the same call in-process and against a bare CAF
//    remote request of the same message types (the engine's floor, a
//    forked echo process);
// 2. 1,000 tool calls from one script on a remote worker against the same
//    cell in-process (those calls never leave the worker);
// 3. memory: the idle worker node, and per idle session it hosts.
// Prints BENCH_ROW lines; --quick keeps it well under a minute.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include "caf/all.hpp"
#include "caf/io/all.hpp"

#include "base/json.hpp"
#include "bench/bench_util.hpp"
#include "messages/type_ids.hpp"
#include "cluster/client.hpp"
#include "runtime/runtime.hpp"
#include "runtime/runtime_impl.hpp"

using namespace mibyan;
using namespace mibyan::bench;
namespace fs = std::filesystem;

namespace {

const char* key = "bench-cluster-key-0123456789abcdef";

void die(const std::string& why) {
  std::fprintf(stderr, "cluster_bench: %s\n", why.c_str());
  std::exit(1);
}

void row(const std::string& metric, double ours, double baseline,
         const std::string& unit, const std::string& goal, double goal_ratio) {
  double ratio = baseline > 0 ? ours / baseline : 0;
  std::string met = goal_ratio > 0 ? (ratio <= goal_ratio ? "true" : "false")
                                   : "null";
  std::printf("BENCH_ROW {\"metric\":\"%s\",\"ours\":%.3f,\"baseline\":%s,"
              "\"ratio\":%s,\"unit\":\"%s\",\"goal\":\"%s\",\"met\":%s}\n",
              metric.c_str(), ours,
              baseline > 0 ? std::to_string(baseline).c_str() : "null",
              baseline > 0 ? std::to_string(ratio).c_str() : "null",
              unit.c_str(), goal.c_str(), met.c_str());
  std::fflush(stdout);
}

// -- the floor: a bare CAF echo of the same message types -------------------

int echo_main() {
  caf::actor_system_config cfg;
  configure_actor_system(cfg, nullptr);
  cfg.set("scheduler.max-threads", size_t{2});
  cfg.set("scheduler.policy", caf::atom("sharing"));
  caf::actor_system sys{cfg};
  auto echo = sys.spawn([]() -> caf::behavior {
    return {[](invoke_atom, tool_request& r) {
      return tool_response{r.call_id, r.tool, "{\"content\":\"x\"}", 0, false};
    }};
  });
  auto port = sys.middleman().publish(echo, 0, "127.0.0.1", true);
  if (!port)
    return 1;
  std::printf("%u\n", static_cast<unsigned>(*port));
  std::fflush(stdout);
  char c;
  while (::read(0, &c, 1) > 0) {
  }
  caf::anon_send_exit(echo, caf::exit_reason::user_shutdown);
  return 0;
}

struct child {
  pid_t pid = -1;
  int in = -1;
  std::string line;
};

// Runs argv with a pipe on stdout; returns after its first line.
child spawn_with_line(const std::vector<std::string>& args,
                      const std::vector<std::string>& env = {}) {
  int out[2], in[2];
  if (::pipe(out) != 0 || ::pipe(in) != 0)
    die("pipe");
  child c;
  c.pid = ::fork();
  if (c.pid == 0) {
    for (auto& e : env)
      ::putenv(const_cast<char*>(e.c_str()));
    ::dup2(out[1], 1);
    ::dup2(in[0], 0);
    int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 2);
    ::close(out[0]);
    ::close(in[1]);
    std::vector<char*> argv;
    for (auto& a : args)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(out[1]);
  ::close(in[0]);
  c.in = in[1];
  auto deadline = clock_type::now() + std::chrono::seconds(60);
  while (clock_type::now() < deadline) {
    pollfd p{out[0], POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0)
      continue;
    char ch;
    if (::read(out[0], &ch, 1) != 1 || ch == '\n')
      break;
    c.line += ch;
  }
  ::close(out[0]);
  return c;
}

void stop(child& c) {
  if (c.pid <= 0)
    return;
  ::close(c.in);
  ::kill(c.pid, SIGTERM);
  ::waitpid(c.pid, nullptr, 0);
  c.pid = -1;
}

double rss_mib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0)
      return std::stod(line.substr(6)) / 1024.0;
  return 0;
}

// CPU time and context switches of every thread of a process, from
// /proc/PID/task/*/schedstat (nanoseconds on the CPU) and .../status:
// where a call's time goes, counted rather than timed (goal 5 of the
// performance round). Threads that end between two samples are lost.
struct proc_sample {
  double cpu_us = 0;
  double switches = 0;
};

proc_sample sample_process(pid_t pid) {
  proc_sample out;
  auto dir = "/proc/" + std::to_string(pid) + "/task";
  std::error_code ec;
  for (auto& t : fs::directory_iterator(dir, ec)) {
    std::ifstream sched(t.path() / "schedstat");
    double ns = 0;
    if (sched >> ns)
      out.cpu_us += ns / 1000.0;
    std::ifstream status(t.path() / "status");
    std::string line;
    while (std::getline(status, line))
      if (line.rfind("voluntary_ctxt_switches:", 0) == 0
          || line.rfind("nonvoluntary_ctxt_switches:", 0) == 0)
        out.switches += std::stod(line.substr(line.find(':') + 1));
  }
  return out;
}

proc_sample per_call(const proc_sample& a, const proc_sample& b, int n) {
  return {(b.cpu_us - a.cpu_us) / n, (b.switches - a.switches) / n};
}

double floor_request_us(uint16_t port, int n, pid_t echo_pid,
                        proc_sample& echo_cost, proc_sample& client_cost) {
  caf::actor_system_config cfg;
  configure_actor_system(cfg, nullptr);
  cfg.set("scheduler.max-threads", size_t{2});
  cfg.set("scheduler.policy", caf::atom("sharing"));
  caf::actor_system sys{cfg};
  auto echo = sys.middleman().remote_actor("127.0.0.1", port);
  if (!echo)
    die("floor: " + sys.render(echo.error()));
  caf::scoped_actor self{sys};
  std::vector<double> xs;
  tool_request req{"s", "c", "read_file", "{\"path\":\"x\"}", "", false};
  proc_sample e0, c0;
  for (int i = 0; i < n + 50; ++i) {
    if (i == 50) {
      e0 = sample_process(echo_pid);
      c0 = sample_process(::getpid());
    }
    auto t = clock_type::now();
    self->request(*echo, std::chrono::seconds(10), invoke_atom_v, req)
      .receive([](tool_response&) {}, [&](caf::error& e) {
        die("floor: " + sys.render(e));
      });
    if (i >= 50)
      xs.push_back(ms_since(t) * 1000);
  }
  echo_cost = per_call(e0, sample_process(echo_pid), n);
  client_cost = per_call(c0, sample_process(::getpid()), n);
  return median(xs);
}

std::string script_code(const std::string& path) {
  return "import time\nfrom mibyan_tools import read_file\n"
         "t = time.perf_counter()\n"
         "for _ in range(1000):\n"
         "    r = read_file(" + json::value{path}.dump() + ")\n"
         "print('US', (time.perf_counter() - t) * 1e6 / 1000)\n";
}

double script_us(const std::string& result) {
  auto at = result.find("US ");
  if (at == std::string::npos)
    die("script failed: " + result.substr(0, 400));
  return std::stod(result.substr(at + 3));
}

} // namespace

int main(int argc, char** argv) {
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--echo")
      return echo_main();
    if (a == "--quick")
      quick = true;
  }
  int n = quick ? 300 : 2000;
  auto tmp = fs::temp_directory_path()
             / ("mibyan_cluster_bench_" + std::to_string(::getpid()));
  fs::create_directories(tmp / "home" / "worker");
  fs::create_directories(tmp / "home" / "local");
  fs::create_directories(tmp / "work");
  std::string cfg_text = "code_execution:\n  sandbox: off\n  prestart_kernels: 1\n"
                         "approvals:\n  unattended_mode: approve\n";
  for (auto h : {"worker", "local"})
    std::ofstream(tmp / "home" / h / "config.yaml") << cfg_text;
  auto file = (tmp / "work" / "small.txt").string();
  std::ofstream(file) << "one line\n";
  std::string args = "{\"path\":" + json::value{file}.dump() + "}";

  // The worker node.
  std::string home_env = "MIBYAN_HOME=" + (tmp / "home" / "worker").string();
  std::string key_env = std::string{"MIBYAN_CLUSTER_KEY="} + key;
  auto worker = spawn_with_line({MIBYAN_BINARY, "node", "--listen",
                                 "127.0.0.1:0", "--role", "worker",
                                 "--workdir", (tmp / "work").string()},
                                {home_env, key_env});
  auto addr_at = worker.line.rfind(' ');
  if (worker.line.rfind("mibyan node ", 0) != 0 || addr_at == std::string::npos)
    die("worker did not start: '" + worker.line + "'");
  auto address = worker.line.substr(addr_at + 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  double idle_rss = rss_mib(worker.pid);

  options copts;
  copts.cluster.key = key;
  auto connected = cluster_client::connect(address, copts);
  if (!connected)
    die("connect: " + connected.error);
  auto client = std::move(*connected);

  // 1. Direct call: remote, in-process, CAF floor.
  std::vector<double> remote;
  proc_sample w0, rc0;
  for (int i = 0; i < n + 50; ++i) {
    if (i == 50) {
      w0 = sample_process(worker.pid);
      rc0 = sample_process(::getpid());
    }
    auto t = clock_type::now();
    auto out = client->call_tool({"direct", "c", "read_file", args, ""});
    if (i >= 50)
      remote.push_back(ms_since(t) * 1000);
    if (i == 0 && out.result_json.find("one line") == std::string::npos)
      die("remote read_file: " + out.result_json);
  }
  auto worker_cost = per_call(w0, sample_process(worker.pid), n);
  auto remote_client_cost = per_call(rc0, sample_process(::getpid()), n);
  options lopts;
  {
    runtime_config rc;
    rc.home = (tmp / "home" / "local").string();
    auto read = options_from_config(rc);
    if (!read)
      die(read.error);
    lopts = std::move(*read);
  }
  auto made = create_runtime(lopts);
  if (!made)
    die("runtime: " + made.error);
  auto rt = std::move(*made);
  std::vector<double> local;
  proc_sample l0;
  for (int i = 0; i < n + 50; ++i) {
    if (i == 50)
      l0 = sample_process(::getpid());
    auto t = clock_type::now();
    rt->call_tool({"direct", "c", "read_file", args, ""});
    if (i >= 50)
      local.push_back(ms_since(t) * 1000);
  }
  auto local_cost = per_call(l0, sample_process(::getpid()), n);
  auto echo = spawn_with_line({argv[0], "--echo"});
  proc_sample echo_cost, floor_client_cost;
  double floor = floor_request_us(static_cast<uint16_t>(std::stoi(echo.line)),
                                  n, echo.pid, echo_cost, floor_client_cost);
  stop(echo);
  double r50 = median(remote), l50 = median(local);
  std::printf("remote direct read_file p50 %.1f us (p99 %.1f), in-process "
              "%.1f us, bare CAF remote request %.1f us\n",
              r50, percentile(remote, 0.99), l50, floor);
  std::printf("per call, CPU us / context switches (all threads): remote "
              "worker %.1f / %.2f, its client %.1f / %.2f; in-process call "
              "%.1f / %.2f; CAF echo %.1f / %.2f, its client %.1f / %.2f\n",
              worker_cost.cpu_us, worker_cost.switches,
              remote_client_cost.cpu_us, remote_client_cost.switches,
              local_cost.cpu_us, local_cost.switches, echo_cost.cpu_us,
              echo_cost.switches, floor_client_cost.cpu_us,
              floor_client_cost.switches);
  row("cluster: worker CPU per remote call vs the CAF echo's per request",
      worker_cost.cpu_us, echo_cost.cpu_us, "us", "info", 0);
  row("cluster: worker context switches per remote call vs the CAF echo's",
      worker_cost.switches, echo_cost.switches, "switches", "info", 0);
  row("cluster: remote direct tool call vs bare CAF remote request", r50,
      floor, "us", "<= 1.3x CAF's own remote request", 1.3);
  row("cluster: remote direct tool call vs in-process", r50, l50, "us",
      "info", 0);
  row("cluster: remote transport overhead (remote - in-process) vs CAF "
      "request",
      r50 - l50, floor, "us", "<= 1.3x", 1.3);

  // 2. 1,000 calls from one script: remote worker vs local.
  auto code = "{\"code\":" + json::value{script_code(file)}.dump() + "}";
  int cells = quick ? 2 : 5;
  std::vector<double> rs, ls;
  client->call_tool({"script", "w", "execute_code", code, ""}); // warm
  rt->call_tool({"script", "w", "execute_code", code, ""});
  for (int i = 0; i < cells; ++i) {
    rs.push_back(script_us(
      client->call_tool({"script", "c", "execute_code", code, ""})
        .result_json));
    ls.push_back(script_us(
      rt->call_tool({"script", "c", "execute_code", code, ""}).result_json));
  }
  row("cluster: in-script tool call on a remote worker vs local", median(rs),
      median(ls), "us", "equal (<= 1.1x)", 1.1);

  // 3. Memory: the idle node and per idle session it hosts.
  int sessions = quick ? 100 : 500;
  double before = rss_mib(worker.pid);
  for (int i = 0; i < sessions; ++i)
    client->call_tool({"idle-" + std::to_string(i), "c", "read_file", args,
                       ""});
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  double after = rss_mib(worker.pid);
  row("cluster: worker node RSS, idle", idle_rss, 0, "MiB", "info", 0);
  row("cluster: worker RSS per idle session (no kernel)",
      (after - before) * 1024.0 / sessions, 0, "KiB", "info", 0);

  client.reset();
  rt.reset();
  stop(worker);
  std::error_code ec;
  fs::remove_all(tmp, ec);
  return 0;
}
