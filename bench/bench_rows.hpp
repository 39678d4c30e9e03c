// File: bench/bench_rows.hpp
//
// Helpers of the agent and store benchmarks: the BENCH_ROW result line
// that scripts/bench.sh collects (docs/benchmarks.md, "Result rows") and
// the process's CPU time.
#pragma once

#include <cmath>
#include <cstdio>
#include <string>

#include <sys/resource.h>

namespace mibyan::bench {

inline std::string buf_fmt(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%.4f", v);
  return b;
}

/// Prints one result row; NaN prints as null, `met` < 0 as null.
inline void bench_row(const std::string& metric, double ours, double baseline,
               double ratio, const char* unit, const std::string& goal,
               int met) {
  auto num = [](double v) {
    return std::isnan(v) ? std::string{"null"} : buf_fmt(v);
  };
  std::printf("BENCH_ROW {\"metric\":\"%s\",\"ours\":%s,\"baseline\":%s,"
              "\"ratio\":%s,\"unit\":\"%s\",\"goal\":\"%s\",\"met\":%s}\n",
              metric.c_str(), num(ours).c_str(), num(baseline).c_str(),
              num(ratio).c_str(), unit, goal.c_str(),
              met < 0 ? "null" : met ? "true" : "false");
}

/// CPU time of the whole process (user + system, all threads) in ms.
inline double process_cpu_ms() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  auto ms = [](const timeval& t) { return t.tv_sec * 1e3 + t.tv_usec / 1e3; };
  return ms(ru.ru_utime) + ms(ru.ru_stime);
}

} // namespace mibyan::bench
