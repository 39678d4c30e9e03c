// File: fuzz/fuzz_input.hpp
//
// Helpers shared by the libFuzzer targets of this folder (docs/testing.md,
// "Fuzzing"). A target gets one byte string; parsers that take a stream
// are fed it in pieces whose sizes come from the input itself, so the
// fuzzer explores chunk boundaries as well as content.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace mibyan::fuzz {

/// Splits `data` into a chunking seed (its first byte, if any) and the
/// payload, then calls `f(piece)` for consecutive pieces of the payload of
/// 1..(seed % 61 + 1) bytes, varying along the way. Seed 0 feeds the payload
/// whole.
template <class F>
void feed_in_pieces(const uint8_t* data, size_t size, F&& f) {
  if (size == 0) {
    f(std::string_view{});
    return;
  }
  unsigned seed = data[0];
  std::string_view rest{reinterpret_cast<const char*>(data + 1), size - 1};
  if (seed == 0) {
    f(rest);
    return;
  }
  size_t step = seed % 61 + 1;
  size_t i = 0;
  while (!rest.empty()) {
    size_t n = (step + i * 7) % (step + 1) + 1;
    if (n > rest.size())
      n = rest.size();
    f(rest.substr(0, n));
    rest.remove_prefix(n);
    ++i;
  }
}

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

} // namespace mibyan::fuzz
