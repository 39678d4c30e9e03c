// File: bench/exec_bench_support.hpp
//
// The shared parts of the execute_code bridge benchmark
// (bench/exec_bench.cpp, bench/exec_bench_calls.cpp): number formatting,
// the bench tools that replace core tools, the child processes of the
// baselines, a runtime to measure with its execute_code helper, and the
// result table with its BENCH_ROW lines (bench/bench_row.hpp). Used from
// main's thread only (the tools run wherever the runtime runs them); every
// failure ends the process through die().
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_util.hpp"
#include "runtime/runtime.hpp"
#include "tools/tool.hpp"

namespace mibyan::exec_bench {

/// --quick: fewer repetitions and configurations.
extern bool quick_run;

// -- statistics ---------------------------------------------------------------

std::string fmt(double v, int prec = 2);
/// The values, space-separated, with `prec` decimals.
std::string list(const std::vector<double>& xs, int prec = 1);
/// Prints "exec_bench: msg" to stderr and exits with 1.
[[noreturn]] void die(const std::string& msg);

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
    auto until = bench::clock_type::now() + std::chrono::milliseconds{100};
    for (auto now = bench::clock_type::now(); now < until;
         now = bench::clock_type::now()) {
      if (ctx.is_cancelled())
        return error_result("cancelled");
      std::this_thread::sleep_for(
        std::min<bench::clock_type::duration>(
          until - now, std::chrono::milliseconds{5}));
    }
    return *json::parse(R"({"results":[]})").v;
  }
};

// -- processes ----------------------------------------------------------------

/// Runs argv and returns its stdout; dies when it fails.
std::string capture(const std::vector<std::string>& argv);
/// The executable `name` on PATH, or "".
std::string which(const std::string& name);
/// Whether `path` starts with "#!".
bool is_script(const std::string& path);
/// A child Python echoing JSON lines over pipes; the median of `n` line
/// round trips in ms (after 10 warm-up lines), the 99th percentile in *p99.
double pipe_echo_p50_ms(const std::string& python, const std::string& script,
                        int n, double* p99);

// -- runtime ------------------------------------------------------------------

struct bench_env {
  std::filesystem::path tmp;
  std::string python_path;   // what python3 on PATH resolves to
  std::string python_real;   // sys.executable
  std::string echo_script;
  int runtimes = 0;
};

/// A runtime with its own home under env.tmp, `prestart` pre-started
/// kernels, `python` for kernels and the bench tools in place of the core
/// ones (max_tool_calls 5000, approvals on "approve").
std::unique_ptr<runtime> make_runtime(bench_env& env, int64_t prestart,
                                      const std::string& python,
                                      const std::string& sandbox = "auto");

struct exec_out {
  double wall_ms = 0;
  int64_t kernel_us = 0;   // tool_outcome.duration_us (line out -> frame in)
  json::value result;
  std::string output;
};

/// Runs `code` with execute_code in `session`; dies unless it succeeded.
exec_out exec(runtime& rt, const std::string& session,
              const std::string& code);

/// The number an output starts with.
double number_in(const std::string& output);

// -- table --------------------------------------------------------------------

/// Adds a row to the printed table and prints its BENCH_ROW line
/// (bench/bench_row.hpp); `met` is null for an informational row.
void add_row(std::string metric, double ours, double base, std::string unit,
             std::string base_name, std::string goal,
             std::optional<bool> met = std::nullopt);

/// Prints the rows added so far as a Markdown table.
void print_table();

// -- sections of bench/exec_bench_calls.cpp ---------------------------------

/// 1. 1,000 no-op calls in one cell against the Python echo baselines,
/// real built-in tools from a script, and the bare actor and pool costs.
void per_call_overhead(bench_env& env, runtime& rt, int reps);
/// 1c. Broker-thread against blocking-pool no-op calls.
void inline_vs_pool(runtime& rt);
/// 1b. 8 threads of one script calling at once against one thread.
void threaded_calls(bench_env& env, runtime& rt, int reps);

} // namespace mibyan::exec_bench
