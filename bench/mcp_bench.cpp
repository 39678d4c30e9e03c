// MCP tool-call round trip over stdio (docs/mcp.md) against the floor: a
// bare JSON-RPC echo over a pipe to the same kind of Python process, in the
// same run. Ours = mcp_session::call_tool (request id, pending table,
// reader thread hand-off, result mapping); baseline = write one line, read
// one line, parse it, on the calling thread.
//
//   mibyan_mcp_bench [--quick]
//
// Prints a table and BENCH_ROW lines (docs/benchmarks.md).
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "base/json.hpp"
#include "base/subprocess.hpp"
#include "bench/bench_util.hpp"
#include "config/options.hpp"
#include "tools/mcp/mcp_session.hpp"

extern char** environ;

using namespace mibyan;

namespace {

using bclock = std::chrono::steady_clock;

const std::string server_script = std::string{MIBYAN_BENCH_DIR}
                                  + "/mcp_echo_server.py";

double med(std::vector<double> xs) {
  std::sort(xs.begin(), xs.end());
  return xs.empty() ? 0 : xs[xs.size() / 2];
}

// The bare baseline: python3 mcp_echo_server.py bare over two pipes.
std::vector<double> bare_round_trips(int n) {
  int in[2], out[2];
  if (::pipe(in) != 0 || ::pipe(out) != 0)
    return {};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_addclose(&fa, in[1]);
  posix_spawn_file_actions_addclose(&fa, out[0]);
  std::string py = find_executable("python3");
  std::vector<std::string> args = {"python3", server_script, "bare"};
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid;
  if (::posix_spawn(&pid, py.c_str(), &fa, nullptr, argv.data(), environ)
      != 0)
    return {};
  posix_spawn_file_actions_destroy(&fa);
  ::close(in[0]);
  ::close(out[1]);
  std::vector<double> us;
  std::string buf;
  char chunk[65536];
  for (int i = 0; i < n; ++i) {
    json::value params;
    params["name"] = "echo";
    params["arguments"]["text"] = "hello";
    json::value m;
    m["jsonrpc"] = "2.0";
    m["id"] = i + 1;
    m["method"] = "tools/call";
    m["params"] = std::move(params);
    auto line = m.dump() + "\n";
    auto t0 = bclock::now();
    if (::write(in[1], line.data(), line.size())
        != static_cast<ssize_t>(line.size()))
      break;
    size_t nl;
    while ((nl = buf.find('\n')) == std::string::npos) {
      auto r = ::read(out[0], chunk, sizeof chunk);
      if (r <= 0)
        break;
      buf.append(chunk, static_cast<size_t>(r));
    }
    auto reply = json::parse(std::string_view{buf}.substr(0, nl));
    buf.erase(0, nl + 1);
    us.push_back(std::chrono::duration<double, std::micro>(bclock::now() - t0)
                   .count());
    if (!reply)
      break;
  }
  ::close(in[1]);
  ::close(out[0]);
  int st;
  ::waitpid(pid, &st, 0);
  return us;
}

void row(const char* metric, double ours, double baseline, const char* unit,
         const char* goal, double limit) {
  bool has_base = baseline > 0;
  double ratio = has_base ? ours / baseline : 0;
  std::printf("BENCH_ROW {\"metric\":\"%s\",\"ours\":%.1f,\"baseline\":%s,"
              "\"ratio\":%s,\"unit\":\"%s\",\"goal\":\"%s\",\"met\":%s}\n",
              metric, ours,
              has_base ? std::to_string(baseline).c_str() : "null",
              has_base ? std::to_string(ratio).c_str() : "null", unit, goal,
              has_base ? (ratio <= limit ? "true" : "false") : "null");
}

} // namespace

int main(int argc, char** argv) {
  bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  int n = quick ? 300 : 3000;
  int reps = quick ? 3 : 5;
  options cfg;
  cfg.home = "/tmp"; // only the stderr log path; the bench server is quiet
  mcp_server_options s;
  s.name = "bench";
  s.transport = "stdio";
  s.command = "python3";
  s.args = {server_script, "mcp"};
  s.connect_timeout = 30;
  std::vector<double> connect_ms, ours_med, base_med;
  for (int r = 0; r < reps; ++r) {
    mcp_session session{s, cfg, nullptr};
    auto t0 = bclock::now();
    auto st = session.connect();
    connect_ms.push_back(
      std::chrono::duration<double, std::milli>(bclock::now() - t0).count());
    if (!st) {
      std::fprintf(stderr, "mcp_bench: connect failed: %s\n",
                   st.error.c_str());
      return 1;
    }
    json::value args;
    args["text"] = "hello";
    std::vector<double> us;
    for (int i = 0; i < n; ++i) {
      auto c0 = bclock::now();
      auto res = session.call_tool("echo", args, nullptr,
                                   bclock::now() + std::chrono::seconds{30},
                                   "/tmp");
      us.push_back(
        std::chrono::duration<double, std::micro>(bclock::now() - c0).count());
      if (res.find("error") != nullptr) {
        std::fprintf(stderr, "mcp_bench: call failed: %s\n",
                     res.dump().c_str());
        return 1;
      }
    }
    session.close();
    ours_med.push_back(med(us));
    base_med.push_back(med(bare_round_trips(n)));
  }
  double ours = med(ours_med), base = med(base_med);
  std::printf("MCP stdio round trip (%d calls x %d runs, medians)\n", n, reps);
  std::printf("  mcp_session::call_tool     %8.1f us\n", ours);
  std::printf("  bare JSON-RPC over a pipe  %8.1f us\n", base);
  std::printf("  ratio                      %8.2f x\n", ours / base);
  std::printf("  connect (spawn+initialize+tools/list) %8.1f ms\n",
              med(connect_ms));
  row("mcp_stdio_call_roundtrip_us", ours, base, "us",
      "MCP call over stdio within 1.5x of a bare JSON-RPC echo over a pipe",
      1.5);
  row("mcp_stdio_connect_ms", med(connect_ms), 0, "ms",
      "spawn + initialize + tools/list of a Python server (informational)",
      0);
  return 0;
}
