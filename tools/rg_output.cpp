#include "tools/rg_output.hpp"

#include <cstdint>

namespace mibyan {

namespace {

std::string base64_decode(const std::string& in) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    int v = value(c);
    if (v < 0)
      continue;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  return out;
}

} // namespace

std::string rg_string(const json::value* v) {
  if (v == nullptr || !v->is_object())
    return {};
  if (auto t = v->find("text"); t && t->is_string())
    return t->as_string();
  if (auto b = v->find("bytes"); b && b->is_string())
    return json::sanitize_utf8(base64_decode(b->as_string()));
  return {};
}

} // namespace mibyan
