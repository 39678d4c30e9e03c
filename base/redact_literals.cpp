#include "base/redact_literals.hpp"

#include <cstring>

namespace mibyan::redact_detail {

namespace {

constexpr size_t min_literal = 8;
// Up to this many values, one memmem each (measured: ten memmem passes
// cost about one hashed pass).
constexpr size_t memmem_max = 8;

inline uint32_t head_at(const char* p) {
  uint32_t w;
  std::memcpy(&w, p, 4);
  return w;
}

inline uint32_t hash16(uint32_t head) {
  return (head * 0x9E3779B1u) >> 16;
}

} // namespace

literal_index::literal_index() : filter_(65536 / 64, 0) {}

void literal_index::add(std::string_view value) {
  auto idx = static_cast<uint32_t>(entries_.size());
  if (value.size() < min_literal) {
    entries_.push_back({0, idx, {}}); // keeps the numbering; never found
    return;
  }
  uint32_t head = head_at(value.data());
  uint32_t h = hash16(head);
  filter_[h >> 6] |= uint64_t{1} << (h & 63);
  entries_.push_back({head, idx, std::string{value}});
}

void literal_index::find_all(std::string_view s,
                             std::vector<literal_hit>& out) const {
  const size_t n = s.size();
  const char* p = s.data();
  size_t live = 0;
  for (auto& e : entries_)
    live += e.value.empty() ? 0 : 1;
  if (live == 0 || n < min_literal)
    return;
  if (live <= memmem_max) {
    // A few needles: memmem's skip loop (tens of GB/s for a long random
    // needle) beats a pass that hashes every position (about 1.7 GB/s).
    for (auto& e : entries_) {
      const auto& v = e.value;
      if (v.empty())
        continue;
      size_t off = 0;
      while (off + v.size() <= n) {
        auto f = static_cast<const char*>(
          ::memmem(p + off, n - off, v.data(), v.size()));
        if (f == nullptr)
          break;
        auto pos = static_cast<size_t>(f - p);
        out.push_back({pos, e.idx});
        off = pos + 1;
      }
    }
    return;
  }
  const uint64_t* filter = filter_.data();
  const size_t last = n - min_literal; // the last position a value fits
  for (size_t pos = 0; pos <= last; ++pos) {
    uint32_t head = head_at(p + pos);
    uint32_t h = hash16(head);
    if (((filter[h >> 6] >> (h & 63)) & 1) == 0)
      continue;
    for (auto& e : entries_)
      if (e.head == head && !e.value.empty() && n - pos >= e.value.size()
          && std::memcmp(p + pos + 4, e.value.data() + 4,
                         e.value.size() - 4) == 0)
        out.push_back({pos, e.idx});
  }
}

} // namespace mibyan::redact_detail
