#include "base/output_cap.hpp"

namespace mibyan {

namespace {

bool is_continuation(unsigned char c) {
  return (c & 0xC0) == 0x80;
}

// Length of the UTF-8 sequence introduced by lead byte `c` (1 for ASCII and
// for invalid lead bytes, which are left to the JSON sanitiser).
size_t sequence_length(unsigned char c) {
  if (c >= 0xF0 && c <= 0xF4)
    return 4;
  if (c >= 0xE0)
    return c <= 0xEF ? 3 : 1;
  if (c >= 0xC2)
    return 2;
  return 1;
}

// Drops an incomplete multi-byte sequence at the end of `s`.
std::string_view trim_tail_cut(std::string_view s) {
  size_t i = s.size();
  size_t back = 0;
  while (i > 0 && back < 3 && is_continuation(s[i - 1])) {
    --i;
    ++back;
  }
  if (i == 0)
    return s;
  auto lead = static_cast<unsigned char>(s[i - 1]);
  auto need = sequence_length(lead);
  if (need > 1 && need > back + 1)
    return s.substr(0, i - 1);
  return s;
}

// Drops continuation bytes at the start of `s` (the rest of a sequence whose
// lead byte was cut off).
std::string_view trim_head_cut(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && i < 3 && is_continuation(s[i]))
    ++i;
  return s.substr(i);
}

} // namespace

std::string truncation_marker(uint64_t omitted, uint64_t total,
                              const char* unit) {
  return "\n\n... [OUTPUT TRUNCATED - " + std::to_string(omitted) + " "
         + unit + " omitted out of " + std::to_string(total)
         + " total] ...\n\n";
}

std::string render_head_tail(std::string_view head, std::string_view tail,
                             uint64_t omitted, uint64_t total,
                             const char* unit) {
  std::string result;
  if (omitted == 0) {
    result.reserve(head.size() + tail.size());
    result.append(head);
    result.append(tail);
    return result;
  }
  auto h = trim_tail_cut(head);
  auto t = trim_head_cut(tail);
  auto marker = truncation_marker(omitted, total, unit);
  result.reserve(h.size() + marker.size() + t.size());
  result.append(h);
  result.append(marker);
  result.append(t);
  return result;
}

std::string strip_ansi(std::string_view s) {
  constexpr char esc = '\x1b';
  std::string result;
  result.reserve(s.size());
  size_t i = 0;
  auto n = s.size();
  while (i < n) {
    char c = s[i];
    if (c != esc) {
      result.push_back(c);
      ++i;
      continue;
    }
    if (i + 1 >= n) { // a lone ESC at the very end
      ++i;
      continue;
    }
    char k = s[i + 1];
    if (k == '[') {
      // CSI: parameter bytes 0x30-0x3F, intermediates 0x20-0x2F, then one
      // final byte 0x40-0x7E.
      size_t j = i + 2;
      while (j < n && s[j] >= 0x20 && s[j] <= 0x3F)
        ++j;
      if (j < n && s[j] >= 0x40 && s[j] <= 0x7E)
        ++j;
      i = j;
    } else if (k == ']' || k == 'P' || k == 'X' || k == '^' || k == '_') {
      // String sequences end at BEL or ST (ESC \).
      size_t j = i + 2;
      while (j < n) {
        if (s[j] == '\x07') {
          ++j;
          break;
        }
        if (s[j] == esc && j + 1 < n && s[j + 1] == '\\') {
          j += 2;
          break;
        }
        ++j;
      }
      i = j;
    } else if (k >= 0x20 && k <= 0x2F) {
      // nF sequences such as ESC ( B: intermediates, then a final byte.
      size_t j = i + 1;
      while (j < n && s[j] >= 0x20 && s[j] <= 0x2F)
        ++j;
      if (j < n)
        ++j;
      i = j;
    } else {
      i += 2; // two-byte sequences: ESC 7, ESC =, ESC M, ...
    }
  }
  return result;
}

} // namespace mibyan
