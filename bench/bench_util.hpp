// File: bench/bench_util.hpp
//
// Timing helpers shared by the benchmarks: wall-clock milliseconds,
// percentiles, and a timed child process run. Header-only; benchmarks are
// single translation units.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

extern char** environ;

namespace mibyan::bench {

using clock_type = std::chrono::steady_clock;

/// Milliseconds elapsed since `start`.
inline double ms_since(clock_type::time_point start) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - start)
    .count();
}

/// The p-th percentile (0 < p <= 1, nearest rank) of `xs`; 0 when empty.
inline double percentile(std::vector<double> xs, double p) {
  if (xs.empty())
    return 0;
  std::sort(xs.begin(), xs.end());
  auto rank = static_cast<size_t>(std::ceil(p * xs.size()));
  return xs[std::min(xs.size() - 1, rank == 0 ? 0 : rank - 1)];
}

inline double median(const std::vector<double>& xs) {
  return percentile(xs, 0.5);
}

/// Runs `args` (looked up on PATH) with stdout and stderr on /dev/null, in
/// `cwd` when non-empty, and returns its wall time in milliseconds. Exits
/// the benchmark when the program cannot be started.
inline double spawn_to_null(const std::vector<std::string>& args,
                            const std::string& cwd = {}) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  if (!cwd.empty())
    posix_spawn_file_actions_addchdir_np(&fa, cwd.c_str());
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  auto start = clock_type::now();
  pid_t pid;
  if (posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), environ) != 0) {
    std::fprintf(stderr, "cannot run %s\n", argv[0]);
    std::exit(1);
  }
  int status;
  waitpid(pid, &status, 0);
  auto t = ms_since(start);
  posix_spawn_file_actions_destroy(&fa);
  return t;
}

} // namespace mibyan::bench
