#include "approvals/denial_breaker.hpp"

namespace mibyan::approvals {

void denial_breaker::touch(const std::string& session) {
  auto it = map_.find(session);
  if (it != map_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second.pos);
    return;
  }
  lru_.push_front(session);
  map_[session].pos = lru_.begin();
  while (map_.size() > capacity_ && !lru_.empty()) {
    map_.erase(lru_.back());
    lru_.pop_back();
  }
}

int64_t denial_breaker::record_deny(const std::string& session) {
  std::lock_guard<std::mutex> guard{mtx_};
  touch(session);
  return ++map_[session].count;
}

void denial_breaker::reset(const std::string& session) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto it = map_.find(session);
  if (it != map_.end())
    it->second.count = 0;
}

int64_t denial_breaker::count(const std::string& session) const {
  std::lock_guard<std::mutex> guard{mtx_};
  auto it = map_.find(session);
  return it == map_.end() ? 0 : it->second.count;
}

void denial_breaker::forget(const std::string& session) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto it = map_.find(session);
  if (it == map_.end())
    return;
  lru_.erase(it->second.pos);
  map_.erase(it);
}

size_t denial_breaker::size() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return map_.size();
}

} // namespace mibyan::approvals
