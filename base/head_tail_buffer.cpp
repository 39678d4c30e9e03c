#include "base/head_tail_buffer.hpp"

#include <algorithm>

namespace mibyan {

head_tail_buffer::head_tail_buffer(size_t head_cap, size_t tail_cap)
  : head_cap_(head_cap), tail_cap_(tail_cap) {
  // Nothing is reserved up front: most outputs are small.
}

head_tail_buffer head_tail_buffer::with_cap(size_t cap) {
  size_t head = cap * 2 / 5;
  return head_tail_buffer{head, cap - head};
}

void head_tail_buffer::append(std::string_view data) {
  total_ += data.size();
  if (head_.size() < head_cap_) {
    auto n = std::min(head_cap_ - head_.size(), data.size());
    head_.append(data.data(), n);
    data.remove_prefix(n);
  }
  if (data.empty() || tail_cap_ == 0)
    return;
  if (data.size() >= tail_cap_) {
    // Only the last tail_cap_ bytes survive; restart the ring with them.
    ring_.assign(data.data() + data.size() - tail_cap_, tail_cap_);
    ring_pos_ = 0;
    return;
  }
  if (ring_.size() < tail_cap_) {
    auto n = std::min(tail_cap_ - ring_.size(), data.size());
    ring_.append(data.data(), n);
    data.remove_prefix(n);
    ring_pos_ = 0;
  }
  // The ring is full: overwrite the oldest bytes, wrapping once at most.
  while (!data.empty()) {
    auto n = std::min(tail_cap_ - ring_pos_, data.size());
    ring_.replace(ring_pos_, n, data.data(), n);
    ring_pos_ = (ring_pos_ + n) % tail_cap_;
    data.remove_prefix(n);
  }
}

uint64_t head_tail_buffer::omitted() const {
  return total_ - head_.size() - ring_.size();
}

std::string head_tail_buffer::tail() const {
  if (ring_.size() < tail_cap_ || ring_pos_ == 0)
    return ring_;
  std::string result;
  result.reserve(ring_.size());
  result.append(ring_, ring_pos_, std::string::npos);
  result.append(ring_, 0, ring_pos_);
  return result;
}

} // namespace mibyan
