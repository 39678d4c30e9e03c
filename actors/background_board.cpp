#include "actors/background_board.hpp"

#include <utility>
#include <vector>

namespace mibyan {

uint64_t background_board::watch(listener fn) {
  std::lock_guard<std::mutex> g{mtx_};
  auto token = next_++;
  listeners_.emplace(token, std::move(fn));
  return token;
}

void background_board::unwatch(uint64_t token) {
  std::lock_guard<std::mutex> g{mtx_};
  listeners_.erase(token);
}

void background_board::announce(const background_notice& n) const {
  std::vector<listener> fns;
  {
    std::lock_guard<std::mutex> g{mtx_};
    for (auto& kv : listeners_)
      fns.push_back(kv.second);
  }
  for (auto& fn : fns) {
    try {
      fn(n);
    } catch (...) {
      // A listener's failure never reaches the conversation.
    }
  }
}

void background_board::child_started(const std::string& session_id) {
  std::lock_guard<std::mutex> g{mtx_};
  ++running_[session_id];
}

void background_board::child_ended(const std::string& session_id) {
  {
    std::lock_guard<std::mutex> g{mtx_};
    auto it = running_.find(session_id);
    if (it == running_.end())
      return;
    if (--it->second == 0)
      running_.erase(it);
  }
  cv_.notify_all();
}

size_t background_board::running(const std::string& session_id) const {
  std::lock_guard<std::mutex> g{mtx_};
  auto it = running_.find(session_id);
  return it == running_.end() ? 0 : it->second;
}

size_t background_board::wait_idle(const std::string& session_id,
                                   std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> g{mtx_};
  auto count = [&] {
    auto it = running_.find(session_id);
    return it == running_.end() ? size_t{0} : it->second;
  };
  cv_.wait_for(g, timeout, [&] { return count() == 0; });
  return count();
}

} // namespace mibyan
