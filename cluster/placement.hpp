// File: cluster/placement.hpp
//
// Rendezvous (highest-random-weight) hashing of a session id over workers
// (docs/cluster.md, "Placement"). Pure and CAF-free: the same inputs give
// the same worker on every node, and removing a worker moves only the
// sessions that were on it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mibyan {

struct placement_candidate {
  std::string node_id;
  /// False when the worker is full (sessions, kernels) or not up.
  bool has_capacity = true;
};

/// The weight of `node_id` for `session_id` (64-bit, well mixed).
uint64_t rendezvous_weight(const std::string& session_id,
                           const std::string& node_id);

/// The candidate with the highest weight among those with capacity; ""
/// when none has capacity.
std::string place_session(const std::string& session_id,
                          const std::vector<placement_candidate>& workers);

} // namespace mibyan
