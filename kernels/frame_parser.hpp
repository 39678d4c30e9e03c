// File: kernels/frame_parser.hpp
//
// Splits a kernel's stdout stream into raw fd-level output and reply
// frames (docs/kernel_protocol.md §4):
//   "\n" SENTINEL " " <decimal body length> "\n" <body bytes>
// A "marker" followed by anything but a decimal length is user output that
// happened to look like one and is passed through as raw output.
//
// A length over the frame limit: when `on_oversized` is set, the body is
// skipped (never buffered) and `on_oversized(length)` is called once it has
// gone by, so the stream stays in step and the kernel stays usable;
// without it, the length is a protocol error (`on_error`, and the parser
// ignores input after it).
//
// Work is linear in the input: every byte is examined a bounded number of
// times, held-back raw bytes never exceed the marker's length, and a body
// is buffered only up to the limit.
//
// Thread safety: none; one owner feeds it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace mibyan {

class frame_parser {
public:
  struct callbacks {
    std::function<void(std::string_view)> on_raw;
    std::function<void(std::string)> on_frame;
    std::function<void(std::string)> on_error;
    /// Optional; see the file comment.
    std::function<void(uint64_t)> on_oversized;
  };

  frame_parser(std::string sentinel, uint64_t max_body = 64ull << 20);

  /// Consumes `data`. Raw bytes that might begin a marker are held back
  /// until the next call (or `finish`).
  void feed(std::string_view data, const callbacks& cb);

  /// Flushes held-back bytes as raw output (end of stream).
  void finish(const callbacks& cb);

  /// Whether a protocol error occurred; the parser ignores input after it.
  bool failed() const { return failed_; }

  /// Bytes examined or copied so far (a measure of work, for tests).
  uint64_t work() const { return work_; }

private:
  enum class state { raw, length, body, skip };

  void run(std::string_view data, const callbacks& cb);

  std::string marker_;
  uint64_t max_body_;
  state state_ = state::raw;
  std::string pending_;   // raw bytes held back, or the length digits
  std::string body_;
  uint64_t body_len_ = 0;
  uint64_t skip_left_ = 0;
  bool failed_ = false;
  uint64_t work_ = 0;
};

} // namespace mibyan
