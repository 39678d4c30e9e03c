// File: agent/iteration_budget.hpp
//
// The per-turn iteration budget of the agent loop (docs/agent_loop.md, "Iteration budget"): a
// counter `{max, used}` that every provider call consumes one unit of, and
// that some iterations give back (compression restarts, content-filter
// fallbacks, tool batches of only `execute_code` calls). Which iterations
// are refunded is the caller's decision; `batch_refunds_iteration` encodes
// the one rule that depends on the tool calls alone.
//
// Thread safety: all member functions may be called concurrently (the
// counter is atomic), so a subagent or an interrupt handler may read
// `remaining()` while the turn consumes.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "messages/chat.hpp"

namespace mibyan {

class iteration_budget {
public:
  /// Default cap of `agent.max_turns` (Mibyan: finite, 90).
  static constexpr int64_t default_max = 90;

  /// Creates a budget of `max` iterations; a negative `max` is treated
  /// as 0 (nothing may be consumed).
  explicit iteration_budget(int64_t max = default_max);

  iteration_budget(const iteration_budget& other);
  iteration_budget& operator=(const iteration_budget& other);

  /// Takes one unit. Returns false, and changes nothing, once
  /// `used() >= max()`.
  bool consume();

  /// Gives one unit back. Returns false, and changes nothing, when nothing
  /// has been consumed.
  bool refund();

  /// Returns `max() - used()` (never negative).
  int64_t remaining() const;

  /// Returns how many units are consumed.
  int64_t used() const { return used_.load(std::memory_order_relaxed); }

  /// Returns the cap.
  int64_t max() const { return max_; }

  /// Returns true when no unit is left.
  bool exhausted() const { return remaining() <= 0; }

private:
  int64_t max_;
  std::atomic<int64_t> used_{0};
};

/// Returns true when the iteration that produced `calls` is refunded: the
/// batch is non-empty and consists only of `execute_code` calls (the
/// script's own tool calls are where the work happens).
bool batch_refunds_iteration(const std::vector<tool_call>& calls);

} // namespace mibyan
