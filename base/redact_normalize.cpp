#include "base/redact_normalize.hpp"

#include <cstring>
#include <limits>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

namespace mibyan::redact_detail {

namespace {

constexpr bool plain_byte(unsigned char c) {
  return (c >= 0x20 && c < 0x7f) || c == '\t' || c == '\n' || c == '\r';
}

// What becomes of one code point: keep (-1), drop (0) or fold to the n
// ASCII bytes written to `buf` (n > 0).
constexpr int keep = -1;
constexpr int drop = 0;

int fold_code_point(uint32_t cp, char* buf) {
  auto one = [&](char c) {
    buf[0] = c;
    return 1;
  };
  if (cp < 0xa0)
    return cp >= 0x80 ? drop : keep; // C1 controls
  if (cp == 0xa0)
    return one(' ');
  if (cp == 0xad || cp == 0x34f || cp == 0x61c || cp == 0x180e)
    return drop;
  if (cp == 0xb2 || cp == 0xb3)
    return one(static_cast<char>('2' + (cp - 0xb2)));
  if (cp == 0xb9)
    return one('1');
  if (cp < 0x2000)
    return keep;
  if (cp <= 0x200a)
    return one(' ');
  if (cp <= 0x200f)
    return drop; // ZWSP, ZWNJ, ZWJ, LRM, RLM
  if (cp >= 0x202a && cp <= 0x202e)
    return drop; // bidi embeddings and overrides
  if (cp == 0x202f || cp == 0x205f)
    return one(' ');
  if (cp >= 0x2060 && cp <= 0x206f && cp != 0x2065)
    return drop; // word joiner, invisible operators, bidi isolates
  if (cp == 0x2070)
    return one('0');
  if (cp >= 0x2074 && cp <= 0x2079)
    return one(static_cast<char>('4' + (cp - 0x2074)));
  if (cp >= 0x2080 && cp <= 0x2089)
    return one(static_cast<char>('0' + (cp - 0x2080)));
  if (cp >= 0x2460 && cp <= 0x2468)
    return one(static_cast<char>('1' + (cp - 0x2460)));
  if (cp >= 0x24b6 && cp <= 0x24cf)
    return one(static_cast<char>('A' + (cp - 0x24b6)));
  if (cp >= 0x24d0 && cp <= 0x24e9)
    return one(static_cast<char>('a' + (cp - 0x24d0)));
  if (cp == 0x24ea)
    return one('0');
  if (cp == 0x3000)
    return one(' ');
  if (cp >= 0xfb00 && cp <= 0xfb06) {
    static const char* const lig[] = {"ff", "fi", "fl", "ffi", "ffl", "st",
                                      "st"};
    auto l = lig[cp - 0xfb00];
    auto len = std::strlen(l);
    std::memcpy(buf, l, len);
    return static_cast<int>(len);
  }
  if (cp >= 0xfe00 && cp <= 0xfe0f)
    return drop; // variation selectors
  if (cp == 0xfeff)
    return drop; // BOM / zero-width no-break space
  if (cp >= 0xff01 && cp <= 0xff5e)
    return one(static_cast<char>(cp - 0xfee0)); // full-width ASCII
  if (cp >= 0xfff9 && cp <= 0xfffb)
    return drop; // interlinear annotation
  if (cp >= 0x1d400 && cp <= 0x1d6a3) {
    auto k = (cp - 0x1d400) % 52; // A-Z a-z in each style
    return one(static_cast<char>(k < 26 ? 'A' + k : 'a' + (k - 26)));
  }
  if (cp >= 0x1d7ce && cp <= 0x1d7ff)
    return one(static_cast<char>('0' + (cp - 0x1d7ce) % 10));
  if (cp >= 0xe0000 && cp <= 0xe007f)
    return drop; // tag characters
  return keep;
}

struct step {
  size_t len = 1;   // source bytes consumed
  int action = keep;
  char buf[4] = {};
};

// Examines the character at s[i] (not plain ASCII, or the caller would not
// ask).
step classify(std::string_view s, size_t i) {
  step st;
  auto c = static_cast<unsigned char>(s[i]);
  const size_t n = s.size();
  if (c < 0x80) {
    if (c == 0x1b && i + 1 < n && s[i + 1] == '[') {
      // CSI: ESC [ parameters intermediates final
      size_t j = i + 2;
      while (j < n && j - i < 64 && s[j] >= 0x30 && s[j] <= 0x3f)
        ++j;
      while (j < n && j - i < 64 && s[j] >= 0x20 && s[j] <= 0x2f)
        ++j;
      if (j < n && s[j] >= 0x40 && s[j] <= 0x7e)
        ++j;
      st.len = j - i;
    }
    st.action = plain_byte(c) ? keep : drop;
    return st;
  }
  size_t len = c >= 0xf0 && c < 0xf5 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
  if (c >= 0xf5 || len == 0 || i + len > n)
    return st; // invalid: kept as a byte
  uint32_t cp = len == 2 ? c & 0x1f : len == 3 ? c & 0x0f : c & 0x07;
  for (size_t k = 1; k < len; ++k) {
    auto d = static_cast<unsigned char>(s[i + k]);
    if ((d & 0xc0) != 0x80)
      return st;
    cp = (cp << 6) | (d & 0x3f);
  }
  st.len = len;
  st.action = fold_code_point(cp, st.buf);
  return st;
}

} // namespace

namespace {

constexpr uint64_t ones = 0x0101010101010101ULL;
constexpr uint64_t highs = 0x8080808080808080ULL;
constexpr uint64_t lows = 0x7f7f7f7f7f7f7f7fULL;

// High bit of each byte of `w` (all below 0x80) set where the byte is `v`.
inline uint64_t bytes_equal(uint64_t w, unsigned char v) {
  uint64_t x = w ^ (ones * v);
  return ~(((x & lows) + lows) | x) & highs;
}

} // namespace

bool is_plain_text(std::string_view s) {
  auto p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
#ifdef __SSE2__
  {
    // 32 bytes a step: a byte is odd when below 0x20 as a signed byte
    // (which takes in every byte from 0x80) and no tab, LF or CR, or DEL.
    const __m128i space = _mm_set1_epi8(0x20);
    const __m128i tab = _mm_set1_epi8('\t');
    const __m128i lf = _mm_set1_epi8('\n');
    const __m128i cr = _mm_set1_epi8('\r');
    const __m128i del = _mm_set1_epi8(0x7f);
    auto odd = [&](__m128i v) {
      __m128i ws = _mm_or_si128(
        _mm_or_si128(_mm_cmpeq_epi8(v, tab), _mm_cmpeq_epi8(v, lf)),
        _mm_cmpeq_epi8(v, cr));
      return _mm_or_si128(_mm_andnot_si128(ws, _mm_cmplt_epi8(v, space)),
                          _mm_cmpeq_epi8(v, del));
    };
    for (; i + 32 <= n; i += 32) {
      __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
      __m128i b =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i + 16));
      if (_mm_movemask_epi8(_mm_or_si128(odd(a), odd(b))) != 0)
        return false;
    }
  }
#endif
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    if (w & highs)
      return false;
    // Exact per byte (no carries: every byte is below 0x80 here).
    uint64_t below = ~((w + ones * 0x60) & highs) & highs; // byte < 0x20
    below &= ~(bytes_equal(w, '\n') | bytes_equal(w, '\t')
               | bytes_equal(w, '\r'));
    if (below | bytes_equal(w, 0x7f))
      return false;
  }
  for (; i < n; ++i)
    if (!plain_byte(p[i]))
      return false;
  return true;
}

bool normalize_for_redaction(std::string_view s, normalized_text& out) {
  const size_t n = s.size();
  if (n >= std::numeric_limits<uint32_t>::max())
    return false;
  // Find the first character that changes.
  size_t i = 0;
  step st;
  while (i < n) {
    if (plain_byte(static_cast<unsigned char>(s[i]))) {
      ++i;
      continue;
    }
    st = classify(s, i);
    if (st.action != keep)
      break;
    i += st.len;
  }
  if (i >= n)
    return false;
  out.text.assign(s.data(), i);
  out.text.reserve(n);
  out.origin.resize(i);
  out.origin.reserve(n + 1);
  for (size_t k = 0; k < i; ++k)
    out.origin[k] = static_cast<uint32_t>(k);
  bool have_step = true; // `st` describes s[i]
  while (i < n) {
    auto c = static_cast<unsigned char>(s[i]);
    if (!have_step && plain_byte(c)) {
      out.text.push_back(static_cast<char>(c));
      out.origin.push_back(static_cast<uint32_t>(i));
      ++i;
      continue;
    }
    if (!have_step)
      st = classify(s, i);
    have_step = false;
    if (st.action == keep) {
      out.text.append(s.data() + i, st.len);
      for (size_t k = 0; k < st.len; ++k)
        out.origin.push_back(static_cast<uint32_t>(i));
    } else if (st.action > 0) {
      out.text.append(st.buf, static_cast<size_t>(st.action));
      for (int k = 0; k < st.action; ++k)
        out.origin.push_back(static_cast<uint32_t>(i));
    }
    i += st.len;
  }
  out.origin.push_back(static_cast<uint32_t>(n));
  return true;
}

void normalized_text::source_span(size_t b, size_t e, size_t& sb,
                                  size_t& se) const {
  sb = origin[b];
  if (e <= b) {
    se = sb;
    return;
  }
  size_t k = e;
  while (k < text.size() && origin[k] == origin[e - 1])
    ++k; // the rest of a character that folded to several bytes
  se = origin[k];
}

} // namespace mibyan::redact_detail
