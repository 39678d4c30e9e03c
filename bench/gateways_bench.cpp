// Several gateways over one store (docs/cluster.md, "Several gateways"):
// 1. turns per second with 1, 2 and 3 `mibyan node --role gateway`
//    processes sharing one $MIBYAN_HOME (one LMDB store and its session
//    leases) against the in-process scripted provider, the turns of each
//    session sent round robin over the gateways (so a session's lease moves
//    on every turn), with the CPU each gateway used per turn; 1 gateway is
//    the baseline of the ratios;
// 2. failover: kill -9 of the gateway running a session's turn (held at the
//    provider) -> that turn done on the other gateway through the client's
//    next address; p50 over 20 trials, goal < 2 x cluster.failure_timeout_ms.
// Prints BENCH_ROW lines; --quick runs fewer turns and 5 failover trials.
// On 2 shared cores the throughput figures show overhead, not scaling.
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/json.hpp"
#include "bench/bench_util.hpp"
#include "bench/scripted_provider.hpp"
#include "cluster/client.hpp"
#include "config/options.hpp"

using namespace mibyan;
using namespace mibyan::bench;
namespace fs = std::filesystem;

namespace {

const char* key = "bench-gateways-key-0123456789abcdef";
constexpr int64_t failure_timeout_ms = 2000;

void die(const std::string& why) {
  std::fprintf(stderr, "gateways_bench: %s\n", why.c_str());
  std::exit(1);
}

void row(const std::string& metric, double ours, double baseline,
         const std::string& unit, const std::string& goal, bool met_known,
         bool met) {
  double ratio = baseline > 0 ? ours / baseline : 0;
  std::printf("BENCH_ROW {\"metric\":\"%s\",\"ours\":%.3f,\"baseline\":%s,"
              "\"ratio\":%s,\"unit\":\"%s\",\"goal\":\"%s\",\"met\":%s}\n",
              metric.c_str(), ours,
              baseline > 0 ? std::to_string(baseline).c_str() : "null",
              baseline > 0 ? std::to_string(ratio).c_str() : "null",
              unit.c_str(), goal.c_str(),
              met_known ? (met ? "true" : "false") : "null");
  std::fflush(stdout);
}

struct gateway {
  pid_t pid = -1;
  std::string id;
  std::string address;
};

// Starts `mibyan node --role gateway` on `home`; returns after its ready
// line (exits the benchmark when it does not come).
gateway start_gateway(const std::string& home, const std::string& provider,
                      const std::string& join) {
  int out[2];
  if (::pipe(out) != 0)
    die("pipe");
  gateway g;
  g.pid = ::fork();
  if (g.pid == 0) {
    ::setenv("MIBYAN_HOME", home.c_str(), 1);
    ::setenv("MIBYAN_CLUSTER_KEY", key, 1);
    ::setenv("CUSTOM_API_KEY", "sk-bench", 1);
    ::unsetenv("MIBYAN_LOG_LEVEL");
    ::dup2(out[1], 1);
    int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 2);
    ::close(out[0]);
    std::vector<std::string> args{MIBYAN_BINARY, "node", "--listen",
                                  "127.0.0.1:0", "--role", "gateway",
                                  "--provider", "custom", "--base-url",
                                  provider, "--model", "m"};
    if (!join.empty()) {
      args.push_back("--join");
      args.push_back(join);
    }
    std::vector<char*> argv;
    for (auto& a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(out[1]);
  std::string line;
  auto deadline = clock_type::now() + std::chrono::seconds(60);
  while (clock_type::now() < deadline) {
    pollfd p{out[0], POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0)
      continue;
    char ch;
    if (::read(out[0], &ch, 1) != 1 || ch == '\n')
      break;
    line += ch;
  }
  ::close(out[0]);
  // "mibyan node NODE_ID listening on HOST:PORT"
  if (line.rfind("mibyan node ", 0) != 0)
    die("a gateway did not start: '" + line + "'");
  auto rest = line.substr(12);
  g.id = rest.substr(0, rest.find(' '));
  g.address = rest.substr(rest.rfind(' ') + 1);
  return g;
}

void stop(gateway& g, int sig = SIGTERM) {
  if (g.pid <= 0)
    return;
  ::kill(g.pid, sig);
  ::waitpid(g.pid, nullptr, 0);
  g.pid = -1;
}

// CPU seconds (user + system) process `pid` used so far.
double cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string all((std::istreambuf_iterator<char>(in)),
                  std::istreambuf_iterator<char>());
  auto close = all.rfind(')');
  if (close == std::string::npos)
    return 0;
  std::istringstream rest(all.substr(close + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i)
    if (i == 14 || i == 15)
      ticks += std::stod(field);
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

options client_options() {
  options o;
  o.cluster.key = key;
  o.cluster.heartbeat_ms = 200;
  o.cluster.failure_timeout_ms = failure_timeout_ms;
  return o;
}

std::unique_ptr<cluster_client> connect_to(const std::string& address) {
  auto c = cluster_client::connect(address, client_options());
  if (!c)
    die("connect " + address + ": " + c.error);
  return std::move(*c);
}

std::string write_home(const fs::path& dir) {
  fs::create_directories(dir);
  std::ofstream(dir / "config.yaml")
    << "cluster:\n  heartbeat_ms: 200\n  failure_timeout_ms: "
    << failure_timeout_ms
    << "\ncode_execution:\n  sandbox: off\n  prestart_kernels: 0\n"
       "cron:\n  enabled: false\n";
  return dir.string();
}

struct throughput {
  double turns_per_s = 0;
  double cpu_ms_per_turn = 0; // all gateways together, per turn
};

// `n` gateways, `clients` threads; thread t runs `turns` turns of its own
// session, turn k sent to gateway (t + k) % n.
throughput run_turns(scripted_server& provider, const fs::path& root, int n,
                     int clients, int turns) {
  auto home = write_home(root / ("home" + std::to_string(n)));
  std::vector<gateway> gws;
  for (int i = 0; i < n; ++i)
    gws.push_back(start_gateway(home, provider.url(),
                                i == 0 ? "" : gws[0].address));
  std::vector<std::vector<std::unique_ptr<cluster_client>>> conns(clients);
  for (auto& per : conns)
    for (auto& g : gws)
      per.push_back(connect_to(g.address));
  // Every gateway sees every other before the clock starts.
  for (int tries = 0; tries < 300; ++tries) {
    auto text = conns[0][0]->members_json();
    auto m = json::parse(text ? *text : std::string{});
    if (m && m.v->is_array() && m.v->as_array().size() == size_t(n))
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::vector<double> cpu0;
  for (auto& g : gws)
    cpu0.push_back(cpu_seconds(g.pid));
  std::atomic<int> failed{0};
  std::string first_error;
  std::mutex err_mtx;
  auto t0 = clock_type::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < clients; ++t)
    threads.emplace_back([&, t] {
      for (int k = 0; k < turns; ++k) {
        turn_call call;
        call.session_id = "bench-" + std::to_string(n) + "-"
                          + std::to_string(t);
        call.prompt = "turn " + std::to_string(k) + " rounds=0";
        auto out = conns[t][(t + k) % n]->run_turn(call);
        if (!out.started) {
          ++failed;
          std::lock_guard<std::mutex> g{err_mtx};
          if (first_error.empty())
            first_error = out.error;
        }
      }
    });
  for (auto& th : threads)
    th.join();
  double secs = ms_since(t0) / 1000.0;
  double cpu = 0;
  for (size_t i = 0; i < gws.size(); ++i)
    cpu += cpu_seconds(gws[i].pid) - cpu0[i];
  if (failed > 0)
    die(std::to_string(failed.load()) + " turn(s) failed with " +
        std::to_string(n) + " gateway(s): " + first_error);
  conns.clear();
  for (auto& g : gws)
    stop(g);
  throughput r;
  r.turns_per_s = clients * turns / secs;
  r.cpu_ms_per_turn = cpu * 1000.0 / (clients * turns);
  return r;
}

// One failover trial: A runs a turn held at the provider; kill -9 A; the
// client (given A,B) sends it again to B, which takes the session over.
double failover_trial(scripted_server& provider, const std::string& home,
                      gateway& b, int trial) {
  auto a = start_gateway(home, provider.url(), b.address);
  auto probe = connect_to(b.address);
  for (int tries = 0; tries < 300; ++tries) {
    auto text = probe->members_json();
    auto m = json::parse(text ? *text : std::string{});
    size_t up = 0;
    if (m && m.v->is_array())
      for (auto& e : m.v->as_array())
        up += e.get_string("state", "") == "up" ? 1 : 0;
    if (up >= 2)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  auto connected = cluster_client::connect(a.address + "," + b.address,
                                           client_options());
  if (!connected)
    die("connect: " + connected.error);
  auto client = std::move(*connected);
  provider.hold(true);
  auto before = provider.held.load();
  std::atomic<bool> done{false};
  turn_result out;
  std::thread t([&] {
    turn_call call;
    call.session_id = "failover-" + std::to_string(trial);
    call.prompt = "hello rounds=0";
    out = client->run_turn(call);
    done = true;
  });
  for (int i = 0; i < 3000 && provider.held.load() == before; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  if (provider.held.load() == before)
    die("the turn never reached the provider");
  auto t0 = clock_type::now();
  stop(a, SIGKILL);
  provider.hold(false);
  t.join();
  double ms = ms_since(t0);
  if (!out.started)
    die("failover trial " + std::to_string(trial) + ": " + out.error);
  if (client->current_address() != b.address)
    die("the client did not move to the other gateway");
  return ms;
}

} // namespace

int main(int argc, char** argv) {
  bool quick = false;
  for (int i = 1; i < argc; ++i)
    if (std::string{argv[i]} == "--quick")
      quick = true;
  std::signal(SIGPIPE, SIG_IGN);
  auto root = fs::temp_directory_path()
              / ("mibyan-gateways-bench-" + std::to_string(::getpid()));
  fs::create_directories(root);
  std::ofstream(root / "f.txt") << "x\n";
  scripted_server provider((root / "f.txt").string());
  int turns = quick ? 20 : 100;
  int clients = 3;
  auto one = run_turns(provider, root, 1, clients, turns);
  row("gateways_turns_per_s_1", one.turns_per_s, 0, "turns/s", "", false,
      false);
  row("gateways_cpu_ms_per_turn_1", one.cpu_ms_per_turn, 0, "ms", "", false,
      false);
  for (int n : {2, 3}) {
    auto r = run_turns(provider, root, n, clients, turns);
    row("gateways_turns_per_s_" + std::to_string(n), r.turns_per_s,
        one.turns_per_s, "turns/s", "", false, false);
    row("gateways_cpu_ms_per_turn_" + std::to_string(n), r.cpu_ms_per_turn,
        one.cpu_ms_per_turn, "ms", "", false, false);
  }
  // Failover.
  auto home = write_home(root / "failover");
  auto b = start_gateway(home, provider.url(), "");
  std::vector<double> xs;
  int trials = quick ? 5 : 20;
  for (int i = 0; i < trials; ++i)
    xs.push_back(failover_trial(provider, home, b, i));
  stop(b);
  double p50 = percentile(xs, 0.5);
  row("gateway_failover_ms_p50", p50, static_cast<double>(failure_timeout_ms),
      "ms", "< 2 x failure_timeout_ms", true,
      p50 < 2.0 * failure_timeout_ms);
  row("gateway_failover_ms_max", *std::max_element(xs.begin(), xs.end()), 0,
      "ms", "", false, false);
  fs::remove_all(root);
  return 0;
}
