// File: storage/byte_codec.hpp
//
// Byte-level encodings used in LMDB keys and values: big-endian 64-bit
// integers (so that memcmp order equals numeric order in keys), LEB128
// varints, and varint-length-prefixed byte strings. Decoders consume from
// a string_view and return false on truncated or malformed input; they
// never read past the view.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace mibyan::codec {

inline void put_be64(std::string& out, uint64_t x) {
  char buf[8];
  for (int i = 7; i >= 0; --i) {
    buf[i] = static_cast<char>(x & 0xff);
    x >>= 8;
  }
  out.append(buf, 8);
}

/// Reads 8 bytes at `p` as a big-endian integer; `p` must have 8 bytes.
inline uint64_t read_be64(const char* p) {
  uint64_t x = 0;
  for (int i = 0; i < 8; ++i)
    x = (x << 8) | static_cast<unsigned char>(p[i]);
  return x;
}

inline std::string be64(uint64_t x) {
  std::string s;
  put_be64(s, x);
  return s;
}

inline void put_varint(std::string& out, uint64_t x) {
  while (x >= 0x80) {
    out.push_back(static_cast<char>((x & 0x7f) | 0x80));
    x >>= 7;
  }
  out.push_back(static_cast<char>(x));
}

inline bool get_varint(std::string_view& in, uint64_t& x) {
  x = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (in.empty())
      return false;
    auto b = static_cast<unsigned char>(in.front());
    in.remove_prefix(1);
    x |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0)
      return true;
  }
  return false;
}

/// Signed integers as zig-zag varints (small magnitudes stay small).
inline void put_svarint(std::string& out, int64_t x) {
  put_varint(out, (static_cast<uint64_t>(x) << 1)
                    ^ static_cast<uint64_t>(x >> 63));
}

inline bool get_svarint(std::string_view& in, int64_t& x) {
  uint64_t u = 0;
  if (!get_varint(in, u))
    return false;
  x = static_cast<int64_t>((u >> 1) ^ (~(u & 1) + 1));
  return true;
}

inline void put_bytes(std::string& out, std::string_view s) {
  put_varint(out, s.size());
  out.append(s.data(), s.size());
}

inline bool get_bytes(std::string_view& in, std::string_view& s) {
  uint64_t n = 0;
  if (!get_varint(in, n) || n > in.size())
    return false;
  s = in.substr(0, n);
  in.remove_prefix(n);
  return true;
}

inline bool get_string(std::string_view& in, std::string& s) {
  std::string_view v;
  if (!get_bytes(in, v))
    return false;
  s.assign(v.data(), v.size());
  return true;
}

/// A versioned record starts with its one format byte: consumes it when it
/// is `format`; false (and `in` unchanged) for another version or none.
inline bool get_format(std::string_view& in, char format) {
  if (in.empty() || in.front() != format)
    return false;
  in.remove_prefix(1);
  return true;
}

} // namespace mibyan::codec
