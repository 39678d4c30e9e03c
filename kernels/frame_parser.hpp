// File: kernels/frame_parser.hpp
//
// Splits a kernel's stdout stream into raw fd-level output and reply
// frames (docs/kernel_protocol.md):
//   "\n" SENTINEL " " <decimal body length> "\n" <body bytes>
// A "marker" followed by anything but a decimal length is user output that
// happened to look like one and is passed through as raw output. A length
// over the frame limit is a protocol error (the kernel is then unusable).
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
  };

  frame_parser(std::string sentinel, uint64_t max_body = 64ull << 20);

  /// Consumes `data`. Raw bytes that might begin a marker are held back
  /// until the next call (or `finish`).
  void feed(std::string_view data, const callbacks& cb);

  /// Flushes held-back bytes as raw output (end of stream).
  void finish(const callbacks& cb);

  /// Whether a protocol error occurred; the parser ignores input after it.
  bool failed() const { return failed_; }

private:
  enum class state { raw, length, body };

  std::string marker_;
  uint64_t max_body_;
  state state_ = state::raw;
  std::string pending_;   // raw bytes held back, or the length digits
  std::string body_;
  uint64_t body_len_ = 0;
  bool failed_ = false;
};

} // namespace mibyan
