// File: bench/bench_row.hpp
//
// The result-row contract of scripts/bench.sh (docs/benchmarks.md, "Result
// rows"): a benchmark prints one stdout line per key metric,
//   BENCH_ROW {"metric":"...","ours":N,"baseline":N|null,"ratio":N|null,
//              "unit":"...","goal":"...","met":true|false|null}
// and bench.sh collects them into one table and bench-results.json.
// Header-only; benchmarks are single translation units.
#pragma once

#include <cmath>
#include <cstdio>
#include <optional>
#include <string>

namespace mibyan::bench {

/// JSON string literal for `s` (quotes, backslashes and control bytes
/// escaped).
inline std::string bench_json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

inline std::string bench_json_number(std::optional<double> v) {
  if (!v || !std::isfinite(*v))
    return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", *v);
  return buf;
}

/// Prints one BENCH_ROW line and flushes stdout. `ratio` defaults to
/// ours / baseline when a positive baseline is given; `met` is null when
/// the goal has no verdict (an informational row).
inline void bench_row(const std::string& metric, double ours,
                      std::optional<double> baseline, const std::string& unit,
                      const std::string& goal, std::optional<bool> met,
                      std::optional<double> ratio = std::nullopt) {
  if (!ratio && baseline && *baseline > 0)
    ratio = ours / *baseline;
  std::printf("BENCH_ROW {\"metric\":%s,\"ours\":%s,\"baseline\":%s,"
              "\"ratio\":%s,\"unit\":%s,\"goal\":%s,\"met\":%s}\n",
              bench_json_string(metric).c_str(),
              bench_json_number(ours).c_str(),
              bench_json_number(baseline).c_str(),
              bench_json_number(ratio).c_str(),
              bench_json_string(unit).c_str(),
              bench_json_string(goal).c_str(),
              met ? (*met ? "true" : "false") : "null");
  std::fflush(stdout);
}

/// True when argv holds `--quick` (the bench.sh flag for a short run).
inline bool bench_quick(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::string{argv[i]} == "--quick")
      return true;
  return false;
}

} // namespace mibyan::bench
