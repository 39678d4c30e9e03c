#include "tools/case_fold.hpp"

#include <clocale>
#include <cwctype>

#include <locale.h>

namespace mibyan {

namespace {

// The C.UTF-8 locale for towlower_l/towupper_l, created once; (locale_t)0
// when the C library has none (then only ASCII folds).
locale_t utf8_locale() {
  static locale_t loc = [] {
    locale_t l = ::newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
    if (l == (locale_t)0)
      l = ::newlocale(LC_CTYPE_MASK, "en_US.UTF-8", (locale_t)0);
    return l;
  }();
  return loc;
}

// Decodes one UTF-8 sequence at `s[i]`; returns its length (0 if invalid).
size_t decode(std::string_view s, size_t i, char32_t& cp) {
  auto b = static_cast<unsigned char>(s[i]);
  size_t len = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3
                          : (b >> 3) == 0x1E ? 4 : 0;
  if (len == 0 || i + len > s.size())
    return 0;
  cp = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
  for (size_t k = 1; k < len; ++k) {
    auto c = static_cast<unsigned char>(s[i + k]);
    if ((c >> 6) != 0x2)
      return 0;
    cp = (cp << 6) | (c & 0x3F);
  }
  static const char32_t min_for_len[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < min_for_len[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
    return 0;
  return len;
}

void encode(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

} // namespace

std::string fold_case(std::string_view utf8) {
  std::string out;
  out.reserve(utf8.size());
  auto loc = utf8_locale();
  for (size_t i = 0; i < utf8.size();) {
    char32_t cp = 0;
    auto len = decode(utf8, i, cp);
    if (len == 0) {
      out.push_back(utf8[i]);
      ++i;
      continue;
    }
    if (cp < 0x80) {
      if (cp >= 'A' && cp <= 'Z')
        cp += 'a' - 'A';
    } else if (loc != (locale_t)0) {
      auto up = ::towupper_l(static_cast<wint_t>(cp), loc);
      cp = static_cast<char32_t>(::towlower_l(up, loc));
    }
    encode(cp, out);
    i += len;
  }
  return out;
}

} // namespace mibyan
