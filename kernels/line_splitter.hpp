// File: kernels/line_splitter.hpp
//
// Splits a byte stream into '\n'-terminated lines for the kernel RPC socket
// (docs/kernel_protocol.md §5.1). Each byte is scanned for the newline once:
// a chunk is searched only from where the previous scan stopped, and a line
// that lies wholly inside one chunk is handed out without being copied, so
// the work is linear in the input whatever the chunking.
//
// A line longer than `max_line` bytes (the newline excluded) makes the
// splitter fail: `feed` returns false, and everything after is ignored.
// The held partial line never exceeds `max_line` bytes.
//
// Thread safety: none; one owner feeds it. Pure; no I/O.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace mibyan {

class line_splitter {
public:
  /// Called once per complete line, without its '\n'. The view is valid
  /// only during the call. The callback must not destroy the splitter.
  using line_fn = std::function<void(std::string_view)>;

  explicit line_splitter(size_t max_line) : max_line_(max_line) {}

  /// Consumes `chunk`, calling `on_line` for each complete line. Returns
  /// false when a line exceeded the limit (now or earlier).
  bool feed(std::string_view chunk, const line_fn& on_line);

  /// Bytes of the partial line held back.
  size_t buffered() const { return partial_.size(); }

  /// Whether a line exceeded the limit.
  bool failed() const { return failed_; }

  /// Bytes examined or copied so far (a measure of work, for tests).
  uint64_t work() const { return work_; }

  /// Drops the held partial line (and releases its memory).
  void clear();

private:
  size_t max_line_;
  std::string partial_;
  bool failed_ = false;
  uint64_t work_ = 0;
};

} // namespace mibyan
