// File: base/head_tail_buffer.hpp
//
// A byte sink of bounded size that keeps the first `head_cap` bytes and the
// last `tail_cap` bytes of everything appended to it, and counts the total.
// A command that prints gigabytes therefore costs head_cap + tail_cap bytes
// of memory. Used by the subprocess runner; tools/output_cap renders the
// kept parts with the truncation marker.
//
// Thread safety: none; one owner appends and reads.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace mibyan {

class head_tail_buffer {
public:
  /// Keeps `head_cap` leading and `tail_cap` trailing bytes.
  head_tail_buffer(size_t head_cap, size_t tail_cap);

  /// Returns a buffer keeping 40 % of `cap` as head and the rest as tail.
  static head_tail_buffer with_cap(size_t cap);

  /// Appends `data`. Amortised O(size of data), never allocates more than
  /// head_cap + tail_cap bytes in total.
  void append(std::string_view data);

  /// Returns the number of bytes appended so far.
  uint64_t total() const { return total_; }

  /// Returns the number of bytes dropped between head and tail.
  uint64_t omitted() const;

  /// Returns whether bytes were dropped.
  bool truncated() const { return omitted() > 0; }

  /// Returns the kept leading bytes.
  const std::string& head() const { return head_; }

  /// Returns the kept trailing bytes, oldest first. When nothing was
  /// dropped, head() + tail() is the whole input.
  std::string tail() const;

  /// Returns head() + tail() (the whole input when !truncated()).
  std::string joined() const { return head_ + tail(); }

private:
  size_t head_cap_;
  size_t tail_cap_;
  std::string head_;
  std::string ring_;    // tail storage, size grows up to tail_cap_
  size_t ring_pos_ = 0; // next write position once ring_ is full
  uint64_t total_ = 0;
};

} // namespace mibyan
