#include "approvals/session_channels.hpp"

namespace mibyan {

namespace {

// Delegation depth is bounded by config (delegation.max_depth); this only
// guards against an alias cycle.
constexpr int max_alias_depth = 16;

} // namespace

void session_channel_table::set(const std::string& session,
                                session_channel ch) {
  std::lock_guard<std::mutex> guard{mtx_};
  channels_[session] = std::move(ch);
}

void session_channel_table::clear(const std::string& session) {
  std::lock_guard<std::mutex> guard{mtx_};
  channels_.erase(session);
  for (auto it = parents_.begin(); it != parents_.end();)
    it = it->second == session ? parents_.erase(it) : std::next(it);
}

void session_channel_table::alias(const std::string& child,
                                  const std::string& parent) {
  if (child.empty() || parent.empty() || child == parent)
    return;
  std::lock_guard<std::mutex> guard{mtx_};
  parents_[child] = parent;
}

void session_channel_table::forget(const std::string& session) {
  std::lock_guard<std::mutex> guard{mtx_};
  parents_.erase(session);
}

std::optional<session_channel>
session_channel_table::find(const std::string& session) const {
  std::lock_guard<std::mutex> guard{mtx_};
  if (channels_.empty())
    return std::nullopt;
  const std::string* id = &session;
  for (int depth = 0; depth < max_alias_depth; ++depth) {
    if (auto it = channels_.find(*id); it != channels_.end())
      return it->second;
    auto p = parents_.find(*id);
    if (p == parents_.end())
      return std::nullopt;
    id = &p->second;
  }
  return std::nullopt;
}

bool session_channel_table::empty() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return channels_.empty();
}

} // namespace mibyan
