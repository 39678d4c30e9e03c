// The shared parts of the execute_code bridge benchmark
// (bench/exec_bench_support.hpp).
#include "bench/exec_bench_support.hpp"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/bench_row.hpp"
#include "base/subprocess.hpp"

namespace fs = std::filesystem;

namespace mibyan::exec_bench {

using namespace mibyan::bench;

bool quick_run = false;


std::string fmt(double v, int prec) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", prec, v);
  return buf;
}

std::string list(const std::vector<double>& xs, int prec) {
  std::string out;
  for (auto x : xs)
    out += (out.empty() ? "" : " ") + fmt(x, prec);
  return out;
}

void die(const std::string& msg) {
  std::fprintf(stderr, "exec_bench: %s\n", msg.c_str());
  std::exit(1);
}

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

std::unique_ptr<runtime> make_runtime(bench_env& env, int64_t prestart,
                                      const std::string& python,
                                      const std::string& sandbox) {
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

namespace {

struct row {
  std::string metric, ours, base, ratio, goal;
};

std::vector<row> table;

} // namespace

void add_row(std::string metric, double ours, double base, std::string unit,
             std::string base_name, std::string goal,
             std::optional<bool> met) {
  bench_row("exec: " + metric, ours, base, unit,
            goal + " (baseline: " + base_name + ")", met);
  table.push_back({std::move(metric), fmt(ours) + " " + unit,
                   fmt(base) + " " + unit + " (" + base_name + ")",
                   base > 0 ? fmt(ours / base) + "x" : "-", std::move(goal)});
}

void print_table() {
  std::printf("\n| metric | ours | baseline | ratio | goal |\n");
  std::printf("|---|---|---|---|---|\n");
  for (auto& r : table)
    std::printf("| %s | %s | %s | %s | %s |\n", r.metric.c_str(),
                r.ours.c_str(), r.base.c_str(), r.ratio.c_str(),
                r.goal.c_str());
}

} // namespace mibyan::exec_bench
