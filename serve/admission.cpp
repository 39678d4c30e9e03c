// Admission of `mibyan serve`'s connections (docs/serve.md, "Limits"): the
// global and per-address connection limits, eviction of connections still
// waiting for a request head, and the short head deadline under pressure.
#include "serve/impl.hpp"

#include <vector>

namespace mibyan {

std::shared_ptr<conn_ticket> admission::oldest_waiting(
  const std::map<uint64_t, std::weak_ptr<conn_ticket>>& m) {
  for (auto& [seq, w] : m)
    if (auto t = w.lock(); t && t->waiting_head && !t->evicted)
      return t;
  return nullptr;
}

void admission::evict_locked(conn_ticket& t) {
  t.evicted = true;
  all_.erase(t.seq);
  auto i = by_addr_.find(t.addr);
  if (i != by_addr_.end()) {
    i->second.erase(t.seq);
    if (i->second.empty())
      by_addr_.erase(i);
  }
}

int64_t admission::waiting_count(
  const std::map<uint64_t, std::weak_ptr<conn_ticket>>& m) {
  int64_t n = 0;
  for (auto& [seq, w] : m)
    if (auto t = w.lock(); t && t->waiting_head && !t->evicted)
      ++n;
  return n;
}

bool admission::admit(const std::shared_ptr<conn_ticket>& t) {
  std::vector<std::shared_ptr<conn_ticket>> evicted, hurried;
  {
    std::lock_guard<std::mutex> g{mtx_};
    auto& mine = by_addr_[t->addr];
    std::shared_ptr<conn_ticket> victim;
    // The per-address cap is on connections still waiting for a request
    // head (what a flood of unfinished heads holds): one address may carry
    // any number of running requests (a reverse proxy, a client with many
    // streams) up to the global limit.
    if (waiting_count(mine) >= limits_.max_connections_per_ip) {
      if ((victim = oldest_waiting(mine))) {
        evict_locked(*victim);
        evicted.push_back(victim);
      }
    }
    if (static_cast<int64_t>(all_.size()) >= limits_.max_connections) {
      victim = oldest_waiting(all_);
      if (!victim) {
        auto i = by_addr_.find(t->addr);
        if (i != by_addr_.end() && i->second.empty())
          by_addr_.erase(i);
        return false;
      }
      evict_locked(*victim);
      evicted.push_back(victim);
    }
    t->seq = ++next_seq_;
    by_addr_[t->addr][t->seq] = t;
    all_[t->seq] = t;
    // Crossing 3/4 of the limit: the connections already waiting for a
    // head get the short deadline too (new ones get it when they start
    // reading). The pressure ends at half the limit (no flapping).
    if (!pressure_
        && static_cast<int64_t>(all_.size()) * 4
             > limits_.max_connections * 3) {
      pressure_ = true;
      for (auto& [seq, w] : all_)
        if (auto c = w.lock(); c && c != t && c->waiting_head)
          hurried.push_back(std::move(c));
    }
  }
  for (auto& v : evicted)
    v->evict();
  for (auto& h : hurried)
    h->hurry();
  return true;
}

void admission::release(conn_ticket& t) {
  std::lock_guard<std::mutex> g{mtx_};
  if (!t.evicted && t.seq != 0)
    evict_locked(t);
  t.evicted = true;
  if (pressure_ && static_cast<int64_t>(all_.size()) * 2
                     <= limits_.max_connections)
    pressure_ = false;
}

void admission::set_waiting(conn_ticket& t, bool waiting) {
  std::lock_guard<std::mutex> g{mtx_};
  t.waiting_head = waiting;
}

bool admission::under_pressure() const {
  std::lock_guard<std::mutex> g{mtx_};
  return pressure_;
}

} // namespace mibyan
