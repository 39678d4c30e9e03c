// File: bench/bench_rows.hpp
//
// Helpers of the agent and store benchmarks: their form of the BENCH_ROW
// line (printed by bench/bench_row.hpp) and the process's CPU time.
#pragma once

#include <cmath>
#include <optional>
#include <string>

#include <sys/resource.h>

#include "bench/bench_row.hpp"

namespace mibyan::bench {

/// The agent and store benches' spelling of bench_row (bench/bench_row.hpp
/// prints the line): NaN means null for `baseline` and `ratio`, `met` < 0
/// means null.
inline void bench_row(const std::string& metric, double ours, double baseline,
                      double ratio, const char* unit, const std::string& goal,
                      int met) {
  auto opt = [](double v) {
    return std::isnan(v) ? std::nullopt : std::optional<double>{v};
  };
  bench_row(metric, ours, opt(baseline), unit, goal,
            met < 0 ? std::nullopt : std::optional<bool>{met != 0}, opt(ratio));
}

/// CPU time of the whole process (user + system, all threads) in ms.
inline double process_cpu_ms() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  auto ms = [](const timeval& t) { return t.tv_sec * 1e3 + t.tv_usec / 1e3; };
  return ms(ru.ru_utime) + ms(ru.ru_stime);
}

} // namespace mibyan::bench
