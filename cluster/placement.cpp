#include "cluster/placement.hpp"

namespace mibyan {

namespace {

uint64_t fnv1a(uint64_t h, const std::string& s) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// splitmix64's finaliser: spreads FNV's low-entropy high bits.
uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

} // namespace

uint64_t rendezvous_weight(const std::string& session_id,
                           const std::string& node_id) {
  auto h = fnv1a(14695981039346656037ull, session_id);
  h = fnv1a(h ^ 0xff, node_id);
  return mix(h);
}

std::string place_session(const std::string& session_id,
                          const std::vector<placement_candidate>& workers) {
  std::string best;
  uint64_t best_weight = 0;
  for (auto& w : workers) {
    if (!w.has_capacity)
      continue;
    auto weight = rendezvous_weight(session_id, w.node_id);
    if (best.empty() || weight > best_weight
        || (weight == best_weight && w.node_id < best)) {
      best = w.node_id;
      best_weight = weight;
    }
  }
  return best;
}

} // namespace mibyan
