// File: agent/iteration_budget.cpp
#include "agent/iteration_budget.hpp"

namespace mibyan {

iteration_budget::iteration_budget(int64_t max) : max_(max < 0 ? 0 : max) {
  // nop
}

iteration_budget::iteration_budget(const iteration_budget& other)
  : max_(other.max_), used_(other.used()) {
  // nop
}

iteration_budget& iteration_budget::operator=(const iteration_budget& other) {
  max_ = other.max_;
  used_.store(other.used(), std::memory_order_relaxed);
  return *this;
}

bool iteration_budget::consume() {
  auto cur = used_.load(std::memory_order_relaxed);
  do {
    if (cur >= max_)
      return false;
  } while (!used_.compare_exchange_weak(cur, cur + 1,
                                        std::memory_order_relaxed));
  return true;
}

bool iteration_budget::refund() {
  auto cur = used_.load(std::memory_order_relaxed);
  do {
    if (cur <= 0)
      return false;
  } while (!used_.compare_exchange_weak(cur, cur - 1,
                                        std::memory_order_relaxed));
  return true;
}

int64_t iteration_budget::remaining() const {
  auto left = max_ - used();
  return left < 0 ? 0 : left;
}

bool batch_refunds_iteration(const std::vector<tool_call>& calls) {
  if (calls.empty())
    return false;
  for (auto& call : calls)
    if (call.name != "execute_code")
      return false;
  return true;
}

} // namespace mibyan
