// File: approvals/denial_breaker.hpp
//
// The denial circuit breaker (docs/approvals.md, "Denial circuit
// breaker"): counts consecutive smart-mode DENY verdicts per session; any
// approval resets the count. At most `capacity` sessions are remembered
// (least recently used dropped). Thread-safe.
#pragma once

#include <cstdint>
#include <list>
#include <mutex>
#include <string>
#include <unordered_map>

namespace mibyan::approvals {

class denial_breaker {
public:
  explicit denial_breaker(size_t capacity = 256) : capacity_(capacity) {}

  /// Counts one guardian DENY; returns the new consecutive count.
  int64_t record_deny(const std::string& session);
  /// Any approval: the count goes back to 0.
  void reset(const std::string& session);
  /// The current count (0 for an unknown session).
  int64_t count(const std::string& session) const;
  void forget(const std::string& session);
  size_t size() const;

private:
  void touch(const std::string& session);
  size_t capacity_;
  mutable std::mutex mtx_;
  std::list<std::string> lru_; // most recent first
  struct entry {
    int64_t count = 0;
    std::list<std::string>::iterator pos;
  };
  std::unordered_map<std::string, entry> map_;
};

} // namespace mibyan::approvals
