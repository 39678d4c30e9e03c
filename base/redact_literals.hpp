// File: base/redact_literals.hpp
//
// Internal to the secret redactor (base/redact.cpp): every occurrence of
// the literal secret values (at least 8 bytes each, see
// min_secret_value_length) in a text. Up to 8 values are searched with
// memmem each; more are found in one pass whatever their number: the
// first 4 bytes at each position are hashed into a 65,536-bit filter of
// the values' first 4 bytes, and only a position that passes is compared
// with the values. Immutable after construction; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mibyan::redact_detail {

struct literal_hit {
  size_t pos;
  uint32_t idx; // the value's number (the order of add)
};

class literal_index {
public:
  literal_index();
  /// Adds a value of at least 8 bytes (shorter ones are ignored).
  void add(std::string_view value);
  /// Appends every occurrence of every value in `s` to `out` (in no
  /// particular order; overlapping occurrences included).
  void find_all(std::string_view s, std::vector<literal_hit>& out) const;

private:
  struct entry {
    uint32_t head; // the first 4 bytes
    uint32_t idx;
    std::string value;
  };
  std::vector<entry> entries_;
  std::vector<uint64_t> filter_; // 65536 bits over the hashed heads
};

} // namespace mibyan::redact_detail
