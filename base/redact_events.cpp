#include "base/redact_events.hpp"

#include <algorithm>

#include "base/redact_names.hpp"

#ifdef __SSE2__
#include <emmintrin.h>
#include <tmmintrin.h>
#endif

namespace mibyan::redact_detail {

namespace {

constexpr uint8_t k_tok = 1;  // [A-Za-z0-9_-]
constexpr uint8_t k_rule = 2; // = : + / backslash
constexpr uint8_t k_pair_before = 4; // may precede a pair separator

struct class_table {
  uint8_t t[256] = {};
  constexpr class_table() {
    for (int c = 0; c < 256; ++c) {
      char ch = static_cast<char>(c);
      if (is_tok(ch))
        t[c] = k_tok;
      else if (ch == '=' || ch == ':' || ch == '+' || ch == '/' || ch == '\\')
        t[c] = k_rule;
      if (is_space(ch) || ch == '"' || ch == '\'' || may_end_secret_pair_name(ch))
        t[c] |= k_pair_before;
    }
  }
};
constexpr class_table classes{};

struct masks {
  uint64_t tok = 0;
  uint64_t rule = 0;
};

// Bit k of the masks describes p[k], for k < len (<= 64); higher bits 0.
masks classify_bytes(const unsigned char* p, size_t len) {
  masks m;
  for (size_t k = 0; k < len; ++k) {
    uint8_t c = classes.t[p[k]];
    m.tok |= static_cast<uint64_t>(c & k_tok) << k;
    m.rule |= static_cast<uint64_t>((c & k_rule) >> 1) << k;
  }
  return m;
}

#ifdef __SSE2__
// The same for 16 bytes: range checks on bytes biased by 0x80 (SSE2 has
// only signed compares), so bytes from 0x80 are never token bytes.
inline void classify16(__m128i v, uint32_t& tok, uint32_t& rule) {
  auto eq = [&](char c) { return _mm_cmpeq_epi8(v, _mm_set1_epi8(c)); };
  __m128i digit = _mm_cmplt_epi8(
    _mm_add_epi8(v, _mm_set1_epi8(static_cast<char>(0x80 - '0'))),
    _mm_set1_epi8(static_cast<char>(0x80 + 10)));
  __m128i folded = _mm_or_si128(v, _mm_set1_epi8(0x20));
  __m128i alpha = _mm_cmplt_epi8(
    _mm_add_epi8(folded, _mm_set1_epi8(static_cast<char>(0x80 - 'a'))),
    _mm_set1_epi8(static_cast<char>(0x80 + 26)));
  __m128i t = _mm_or_si128(_mm_or_si128(digit, alpha),
                           _mm_or_si128(eq('_'), eq('-')));
  __m128i r = _mm_or_si128(_mm_or_si128(eq('='), eq(':')),
                           _mm_or_si128(_mm_or_si128(eq('+'), eq('/')),
                                        eq('\\')));
  tok = static_cast<uint32_t>(_mm_movemask_epi8(t));
  rule = static_cast<uint32_t>(_mm_movemask_epi8(r));
}

masks classify64(const unsigned char* p) {
  masks m;
  for (int k = 0; k < 4; ++k) {
    uint32_t t, r;
    classify16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * k)),
               t, r);
    m.tok |= static_cast<uint64_t>(t) << (16 * k);
    m.rule |= static_cast<uint64_t>(r) << (16 * k);
  }
  return m;
}
#else
masks classify64(const unsigned char* p) {
  return classify_bytes(p, 64);
}
#endif

// Token bytes among the (up to 16) bytes at p, as bits.
uint64_t tok_ahead(const unsigned char* p, size_t len) {
#ifdef __SSE2__
  if (len == 16) {
    uint32_t t, r;
    classify16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)), t, r);
    return t;
  }
#endif
  return classify_bytes(p, len).tok;
}

#if defined(__SSE2__) && (defined(__x86_64__) || defined(__i386__))
#define MIBYAN_REDACT_SSSE3 1
// Bit k set where p[k] | 0x20 is in the set of the nibble tables lo/hi:
// two 16-byte shuffles per 16 bytes.
__attribute__((target("ssse3"))) uint64_t
first_bytes64(const unsigned char* p, const uint8_t* lo, const uint8_t* hi) {
  const __m128i lo_t = _mm_load_si128(reinterpret_cast<const __m128i*>(lo));
  const __m128i hi_t = _mm_load_si128(reinterpret_cast<const __m128i*>(hi));
  const __m128i low4 = _mm_set1_epi8(0x0f);
  uint64_t out = 0;
  for (int k = 0; k < 4; ++k) {
    __m128i v = _mm_or_si128(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * k)),
      _mm_set1_epi8(0x20));
    __m128i l = _mm_shuffle_epi8(lo_t, _mm_and_si128(v, low4));
    __m128i h =
      _mm_shuffle_epi8(hi_t, _mm_and_si128(_mm_srli_epi16(v, 4), low4));
    __m128i none = _mm_cmpeq_epi8(_mm_and_si128(l, h), _mm_setzero_si128());
    out |= static_cast<uint64_t>(
             static_cast<uint16_t>(~_mm_movemask_epi8(none)))
           << (16 * k);
  }
  return out;
}

bool have_ssse3() {
  static const bool yes = __builtin_cpu_supports("ssse3");
  return yes;
}
#endif

inline unsigned lowest(uint64_t x) {
  return static_cast<unsigned>(__builtin_ctzll(x));
}

} // namespace

event_finder::event_finder() : bigrams_(65536 / 64, 0) {}

void event_finder::add_prefix(std::string_view prefix, bool any_case) {
  if (prefix.size() < 2)
    return;
  auto mark = [&](char a, char b) {
    unsigned k = static_cast<unsigned char>(a) << 8 | static_cast<unsigned char>(b);
    bigrams_[k >> 6] |= uint64_t{1} << (k & 63);
    auto f = static_cast<unsigned char>(a);
    firsts_[f >> 6] |= uint64_t{1} << (f & 63);
    // The nibble tables of the folded byte.
    auto folded = static_cast<unsigned char>(f | 0x20);
    uint8_t& hi = hi_[folded >> 4];
    if (hi == 0) {
      if (hi_bits_ == 8) {
        nibbles_ = false;
        return;
      }
      hi = static_cast<uint8_t>(1u << hi_bits_++);
    }
    lo_[folded & 15] |= hi;
  };
  char a = prefix[0], b = prefix[1];
  mark(a, b);
  if (any_case) {
    auto other = [](char c) {
      return is_lower(c) ? static_cast<char>(c - 'a' + 'A')
             : is_upper(c) ? static_cast<char>(c - 'A' + 'a')
                           : c;
    };
    mark(other(a), b);
    mark(a, other(b));
    mark(other(a), other(b));
  }
}

inline bool event_finder::candidate(const char* p, size_t pos, size_t n) const {
  if (pos + 1 >= n)
    return false; // every prefix has two bytes or more
  auto f = static_cast<unsigned char>(p[pos]);
  if (((firsts_[f >> 6] >> (f & 63)) & 1) == 0)
    return false; // the small table first: it stays in the L1 cache
  unsigned k = static_cast<unsigned char>(p[pos]) << 8
               | static_cast<unsigned char>(p[pos + 1]);
  return (bigrams_[k >> 6] >> (k & 63)) & 1;
}

size_t event_finder::next(std::string_view s, size_t i, size_t end,
                          size_t long_from) const {
  return event_cursor{*this, s}.next(i, end, long_from);
}

void event_cursor::load(size_t at) {
  const char* p = s_.data();
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  const size_t n = s_.size();
  const size_t len = std::min<size_t>(64, n - at);
  base_ = at;
  len_ = len;
  masks m = len == 64 ? classify64(u + at) : classify_bytes(u + at, len);
  // A token start: a token byte after a non-token byte (or the text's
  // start).
  uint64_t before = at > 0 && (classes.t[u[at - 1]] & k_tok) ? 1 : 0;
  uint64_t starts = m.tok & ~((m.tok << 1) | before);
  uint64_t ev = m.rule;
  // Pair separators where no pair rule can start are no events.
  for (uint64_t r = m.rule; r != 0; r &= r - 1) {
    size_t pos = at + lowest(r);
    char c = p[pos];
    if (c != '=' && c != ':')
      continue;
    bool keep = (pos > 0 && (classes.t[u[pos - 1]] & k_pair_before))
                || (c == ':' && n - pos > 2 && p[pos + 1] == '/'
                    && p[pos + 2] == '/');
    if (!keep)
      ev &= ~(uint64_t{1} << (pos - at));
  }
  longs_ = 0;
  if (starts != 0) {
    // Tokens of at least 10 bytes: bytes k..k+9 all token bytes, with
    // the next 16 bytes for the tokens that run over the block's end.
    uint64_t ahead = 0;
    if (len == 64 && at + 64 < n && (m.tok >> 63) != 0)
      ahead = tok_ahead(u + at + 64, std::min<size_t>(16, n - at - 64));
    unsigned __int128 t = m.tok | (static_cast<unsigned __int128>(ahead) << 64);
    auto t2 = t & (t >> 1);
    auto t4 = t2 & (t2 >> 2);
    auto t8 = t4 & (t4 >> 4);
    longs_ = static_cast<uint64_t>(t8 & (t2 >> 8)) & starts;
  }
  uint64_t maybe = starts & ~ev;
#ifdef MIBYAN_REDACT_SSSE3
  // Only the token starts whose first byte begins a prefix.
  if (len == 64 && f_.nibbles_ && maybe != 0 && have_ssse3())
    maybe &= first_bytes64(u + at, f_.lo_, f_.hi_);
#endif
  // Token starts whose first two bytes begin a prefix.
  for (uint64_t c = maybe; c != 0; c &= c - 1) {
    unsigned k = lowest(c);
    if (f_.candidate(p, at + k, n))
      ev |= uint64_t{1} << k;
  }
  fixed_ = ev;
}

size_t event_cursor::next(size_t i, size_t end, size_t long_from) {
  while (i < end) {
    if (len_ == 0 || i < base_ || i >= base_ + len_)
      load(i);
    uint64_t longs = 0;
    if (long_from != std::string_view::npos) {
      longs = longs_;
      if (long_from > base_)
        longs &= long_from - base_ >= 64 ? 0
                                         : ~uint64_t{0} << (long_from - base_);
    }
    uint64_t m = (fixed_ | longs) & (~uint64_t{0} << (i - base_));
    if (m != 0)
      return std::min(base_ + lowest(m), end);
    i = base_ + len_;
  }
  return end;
}

} // namespace mibyan::redact_detail
