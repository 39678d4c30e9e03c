#include "config/option_bounds.hpp"

#include <limits>

namespace mibyan {

const std::vector<numeric_bounds>& numeric_option_bounds() {
  // Seconds are capped at a day (a cell, a command, a request), sizes at a
  // GiB, counts where threads, kernels or retries stay affordable.
  constexpr int64_t day = 86'400;
  constexpr int64_t gib = 1'073'741'824;
  static const std::vector<numeric_bounds> table{
    {"agent", "max_turns", 1, 10'000},
    {"agent", "api_max_retries", 1, 100},
    {"provider", "request_timeout", 1, day},
    {"provider", "stream_idle_timeout", 1, day},
    {"provider", "connect_timeout", 1, 3'600},
    {"terminal", "timeout", 1, day},
    {"approvals", "timeout", 1, day},
    {"clarify", "timeout", 1, day},
    {"terminal", "max_timeout", 1, day},
    {"terminal", "kill_grace", 0, 3'600},
    {"tool_output", "max_bytes", 1'000, 100'000'000},
    {"tool_output", "max_lines", 1, 1'000'000},
    {"tool_output", "max_line_chars", 80, 1'000'000},
    {"tool_output", "read_char_budget", 1'000, 100'000'000},
    {"web", "extract_char_limit", 2'000, 100'000'000},
    {"web", "max_download_bytes", 1'024, gib},
    {"web", "fetch_timeout", 1, day},
    {"web", "connect_timeout", 1, 3'600},
    {"web", "max_redirects", 0, 100},
    {"code_execution", "timeout", 1, day},
    {"code_execution", "max_tool_calls", 0, 100'000},
    {"code_execution", "max_stdout_bytes", 100, gib},
    {"code_execution", "max_stderr_bytes", 100, gib},
    {"code_execution", "max_spill_bytes", 0, gib},
    {"code_execution", "kernel_idle_timeout", 1, 30 * day},
    {"code_execution", "max_session_kernels", 1, 1'024},
    {"code_execution", "prestart_kernels", 0, 64},
    {"runtime", "scheduler_threads", 0, 512},
    {"runtime", "blocking_threads", 1, 1'024},
    {"runtime", "io_spin_us", 0, 10'000},
    {"model", "context_length", 0, 100'000'000},
    {"delegation", "max_concurrent_children", 1, 64},
    {"delegation", "max_iterations", 1, 10'000},
    {"compression", "protect_first_n", 0, 1'000},
    {"compression", "protect_last_n", 1, 10'000},
    {"compression", "keep_tool_results", 0, 10'000},
    {"compression", "prune_min_chars", 0, 100'000'000},
    {"context_files", "max_chars", 1'000, 10'000'000},
    {"memory", "memory_char_limit", 100, 1'000'000},
    {"memory", "user_char_limit", 100, 1'000'000},
    {"cluster", "heartbeat_ms", 10, 60'000},
    {"cluster", "failure_timeout_ms", 50, 3'600'000},
    {"cluster", "max_sessions", 1, 1'000'000},
    {"cluster", "drain_timeout_ms", 0, 3'600'000},
    {"cluster", "max_frame_mb", 1, 4095},
    {"cron", "max_concurrent", 1, 64},
    {"cron", "max_failures", 0, 1'000},
    {"cron", "history_keep", 1, 100'000},
    {"cron", "webhook_timeout", 1, 600},
    {"cron", "webhook_attempts", 1, 10},
    {"storage", "postgres.pool_size", 1, 256},
    {"checkpoints", "max_file_mb", 1, 4'096},
    {"checkpoints", "keep", 1, 100'000},
    {"checkpoints", "max_age_days", 0, 36'500},
    {"checkpoints", "max_files", 1, 10'000'000},
  };
  return table;
}

std::string check_numeric_bounds(std::string_view section,
                                 std::string_view key, int64_t value) {
  int64_t min = std::numeric_limits<int64_t>::min();
  int64_t max = default_numeric_max;
  for (auto& b : numeric_option_bounds())
    if (section == b.section && key == b.key) {
      min = b.min;
      max = b.max;
    }
  if (value < min || value > max) {
    if (min == std::numeric_limits<int64_t>::min())
      return "must be at most " + std::to_string(max) + ", got "
             + std::to_string(value);
    return "must be between " + std::to_string(min) + " and "
           + std::to_string(max) + ", got " + std::to_string(value);
  }
  return {};
}

} // namespace mibyan
