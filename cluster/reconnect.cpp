// Redialling lost members (docs/cluster.md, "Failure detection"): a member
// lost to a dropped connection or silence is dialled again at its address
// with exponential backoff (100 ms doubling to 5 s, with jitter) until it
// answers the handshake, leaves, or this node leaves. Both sides of a cut
// link redial; CAF keeps one connection per pair of nodes and the second
// handshake finds the member already up.
#include "cluster/internal.hpp"

#include <algorithm>
#include <random>

#include "caf/all.hpp"

#include "base/log.hpp"

namespace mibyan {

namespace {

using namespace std::chrono;

constexpr int64_t first_delay_ms = 100;
constexpr int64_t max_delay_ms = 5000;

milliseconds backoff(int attempt) {
  static thread_local std::mt19937 rng{std::random_device{}()};
  int64_t d = first_delay_ms << std::min(attempt, 6);
  d = std::min(d, max_delay_ms);
  // Up to a quarter more, so two sides do not dial in lockstep.
  std::uniform_int_distribution<int64_t> jitter{0, d / 4};
  return milliseconds{d + jitter(rng)};
}

bool still_lost(cluster_actor* self, const std::string& id) {
  auto& st = self->state;
  if (st.left || st.drain_requested)
    return false;
  auto it = st.peers.find(id);
  if (it == st.peers.end() || it->second.info.state != "lost"
      || it->second.info.address.empty())
    return false;
  // A member restarted under a new id at the same address is another
  // member; the old id stays lost.
  for (auto& kv : st.peers)
    if (kv.first != id && kv.second.info.address == it->second.info.address
        && kv.second.info.state != "lost" && kv.second.info.state != "left")
      return false;
  return true;
}

void arm(cluster_actor* self, const std::string& id, int attempt) {
  self->delayed_send(self, backoff(attempt), tick_atom_v, id);
}

} // namespace

void schedule_redial(cluster_actor* self, const std::string& id) {
  auto& st = self->state;
  if (!still_lost(self, id) || st.redial.count(id) > 0)
    return;
  st.redial[id] = 0;
  arm(self, id, 0);
}

void redial(cluster_actor* self, const std::string& id) {
  auto& st = self->state;
  auto it = st.redial.find(id);
  if (it == st.redial.end())
    return;
  if (!still_lost(self, id)) {
    st.redial.erase(it);
    return;
  }
  auto attempt = it->second;
  auto address = st.peers[id].info.address;
  join_address(self, address, [self, id, address, attempt](std::string why) {
    auto& st = self->state;
    auto r = st.redial.find(id);
    if (r == st.redial.end())
      return;
    if (!still_lost(self, id)) {
      st.redial.erase(r);
      return;
    }
    // Failed, or another join to the address was in flight: try again.
    if (attempt == 0 && !why.empty())
      MIBYAN_LOG(info, "cluster", "redialling member " << id << " at "
                                                       << address << ": "
                                                       << why);
    r->second = attempt + 1;
    arm(self, id, attempt + 1);
  });
}

} // namespace mibyan
