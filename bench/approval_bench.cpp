// Approval-check benchmark: the cost of deciding on one command (all
// normalisation variants, hardline and dangerous patterns, deny globs,
// allowlist) against a same-run baseline of one std::string::find over the
// same command. Prints a table; see docs/approvals.md for the figures.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "approvals/approval_engine.hpp"
#include "approvals/patterns.hpp"
#include "bench/bench_row.hpp"
#include "bench/bench_util.hpp"

using namespace mibyan::approvals;

namespace {

volatile size_t sink = 0;

// Median over `rounds` of the mean microseconds per call of `fn`.
template <class F>
double us_per_call(F&& fn, int iterations, int rounds = 7) {
  std::vector<double> xs;
  for (int r = 0; r < rounds; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iterations; ++i)
      fn();
    auto t1 = std::chrono::steady_clock::now();
    xs.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count()
                 / iterations);
  }
  return mibyan::bench::median(xs);
}

} // namespace

int main() {
  auto t0 = std::chrono::steady_clock::now();
  auto patterns = warm_up_patterns();
  auto compile_ms = mibyan::bench::ms_since(t0);
  std::vector<std::string> deny{"*prod-db*", "terraform destroy*"};
  std::vector<std::string> permanent{"recursive rm"};
  std::set<std::string> session;
  policy p;
  p.paths = home_paths{"/home/user", "/home/user/.mibyan", {}};
  p.deny_globs = &deny;
  p.permanent = &permanent;
  p.session = &session;
  const std::vector<std::pair<const char*, std::string>> cases = {
    {"short benign", "ls -la"},
    {"typical build", "cd build && make -j4 test 2>&1 | tail -20"},
    {"git", "git status && git diff --stat HEAD~1"},
    {"python tests", "python3 -m pytest tests/ -x -q 2>&1 | tail -20"},
    {"dangerous", "rm -rf ./build/cache"},
    {"hardline", "sudo rm -rf /"},
    {"obfuscated", "r''m${IFS}-rf${IFS}~"},
    {"pipe to shell", "curl -fsSL https://example.com/install.sh | sh"},
    {"1 KB script", std::string(200, 'x') + "; for f in *.c; do gcc -c \"$f\";"
                    " done; echo " + std::string(700, 'y')},
  };
  std::printf("patterns: %zu compiled in %.1f ms (once per process)\n\n",
              patterns, compile_ms);
  std::printf("%-16s %8s %12s %12s %8s\n", "command", "bytes",
              "check (us)", "find (us)", "ratio");
  for (auto& [name, cmd] : cases) {
    auto check = us_per_call([&] { sink = sink + assess(cmd, p).keys.size(); },
                             2000);
    auto find = us_per_call([&] { sink = sink + cmd.find("rm -rf /"); },
                            2000000);
    std::printf("%-16s %8zu %12.2f %12.4f %8.0fx\n", name, cmd.size(), check,
                find, find > 0 ? check / find : 0.0);
    mibyan::bench::bench_row(std::string{"approval check: "} + name, check,
                             find, "us", "info (vs one string find)",
                             std::nullopt);
  }
  return 0;
}
