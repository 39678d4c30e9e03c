#include "base/redact_shapes.hpp"

#include <cstring>
#include <iterator>
#include <vector>

#include "base/redact_names.hpp"
#include "base/strings.hpp"

namespace mibyan::redact_detail {

namespace {

using namespace std::string_view_literals;

// Characters of a bearer token (RFC 6750 b64token).
constexpr bool is_b64tok(char c) {
  return is_tok(c) || c == '.' || c == '~' || c == '+' || c == '/'
         || c == '=';
}

bool starts_at(std::string_view s, size_t i, std::string_view lit) {
  return s.size() - i >= lit.size()
         && std::memcmp(s.data() + i, lit.data(), lit.size()) == 0;
}

// ---------------------------------------------------------------------------
// Key shapes with a literal prefix

enum class body_class { tok, alnum, upper_digit, word, slack };

struct key_shape {
  std::string_view prefix;
  body_class body;
  size_t min_len;
  size_t max_len; // 0: unbounded
  bool need_digit; // the body must contain a digit (cuts false positives)
};

// Longer prefixes first where one prefix starts another (sk-ant- before
// sk-); the first shape that matches wins.
const key_shape key_shapes[] = {
  {"sk-ant-"sv, body_class::tok, 20, 0, false},
  {"sk-proj-"sv, body_class::tok, 20, 0, false},
  {"sk-or-v1-"sv, body_class::tok, 20, 0, false},
  {"sk-or-"sv, body_class::tok, 20, 0, false},
  {"sk-"sv, body_class::tok, 20, 0, true},
  {"sk_live_"sv, body_class::alnum, 16, 0, false},
  {"sk_test_"sv, body_class::alnum, 16, 0, false},
  {"rk_live_"sv, body_class::alnum, 16, 0, false},
  {"rk_test_"sv, body_class::alnum, 16, 0, false},
  {"gsk_"sv, body_class::alnum, 20, 0, false},
  {"ghp_"sv, body_class::alnum, 30, 0, false},
  {"gho_"sv, body_class::alnum, 30, 0, false},
  {"ghu_"sv, body_class::alnum, 30, 0, false},
  {"ghs_"sv, body_class::alnum, 30, 0, false},
  {"ghr_"sv, body_class::alnum, 30, 0, false},
  {"github_pat_"sv, body_class::word, 22, 0, false},
  {"glpat-"sv, body_class::tok, 20, 0, false},
  {"xai-"sv, body_class::tok, 20, 0, false},
  {"xoxb-"sv, body_class::slack, 10, 0, true},
  {"xoxa-"sv, body_class::slack, 10, 0, true},
  {"xoxp-"sv, body_class::slack, 10, 0, true},
  {"xoxr-"sv, body_class::slack, 10, 0, true},
  {"xoxs-"sv, body_class::slack, 10, 0, true},
  {"AIza"sv, body_class::tok, 35, 35, false},
  {"AKIA"sv, body_class::upper_digit, 16, 16, false},
  {"ASIA"sv, body_class::upper_digit, 16, 16, false},
  {"hf_"sv, body_class::alnum, 30, 0, false},
  {"npm_"sv, body_class::alnum, 30, 0, false},
  {"pypi-AgE"sv, body_class::tok, 50, 0, false},
};

bool in_body(body_class b, char c) {
  switch (b) {
    case body_class::tok:
      return is_tok(c);
    case body_class::alnum:
      return is_alnum(c);
    case body_class::upper_digit:
      return is_upper(c) || is_digit(c);
    case body_class::word:
      return is_alnum(c) || c == '_';
    case body_class::slack:
      return is_alnum(c) || c == '-';
  }
  return false;
}

// Indices into key_shapes by the first byte of their prefix, in table
// order.
const std::array<std::vector<uint8_t>, 256>& shapes_by_first() {
  static const auto table = [] {
    std::array<std::vector<uint8_t>, 256> t;
    for (size_t k = 0; k < std::size(key_shapes); ++k)
      t[static_cast<unsigned char>(key_shapes[k].prefix[0])].push_back(
        static_cast<uint8_t>(k));
    return t;
  }();
  return table;
}

} // namespace

bool prefixed_key(std::string_view s, size_t i, match& m) {
  if (i + 1 >= s.size())
    return false;
  for (auto idx : shapes_by_first()[static_cast<unsigned char>(s[i])]) {
    auto& k = key_shapes[idx];
    auto prefix = k.prefix;
    if (s[i + 1] != prefix[1] || !starts_at(s, i, prefix))
      continue;
    size_t j = i + prefix.size();
    bool digit = false;
    bool alpha = false;
    while (j < s.size() && in_body(k.body, s[j])) {
      digit = digit || is_digit(s[j]);
      alpha = alpha || is_alpha(s[j]);
      ++j;
    }
    size_t len = j - i - prefix.size();
    if (len < k.min_len || (k.max_len != 0 && len != k.max_len))
      continue;
    if (j < s.size() && is_tok(s[j]))
      continue; // runs on into a longer word of another class
    if (k.need_digit && !(digit && alpha))
      continue;
    m.begin = i;
    m.end = j;
    m.replacement = std::string{prefix} + "[REDACTED]";
    return true;
  }
  return false;
}

// eyJ<header>.<payload>.<signature>
bool jwt(std::string_view s, size_t i, match& m) {
  if (!starts_at(s, i, "eyJ"))
    return false;
  size_t j = i + 3;
  size_t parts_len[3] = {3, 0, 0};
  int part = 0;
  while (j < s.size()) {
    char c = s[j];
    if (is_tok(c)) {
      ++parts_len[part];
    } else if (c == '.' && part < 2) {
      ++part;
    } else {
      break;
    }
    ++j;
  }
  if (part < 2 || parts_len[0] < 10 || parts_len[1] < 10)
    return false;
  m.begin = i;
  m.end = j;
  m.replacement = "[REDACTED]";
  return true;
}

// Bearer <token>
bool bearer(std::string_view s, size_t i, match& m) {
  if (s.size() - i < 7 || !strings::iequals(s.substr(i, 6), "bearer"))
    return false;
  size_t j = i + 6;
  if (!is_space(s[j]))
    return false;
  while (j < s.size() && is_space(s[j]))
    ++j;
  size_t b = j;
  bool digit = false, up = false, lo = false;
  while (j < s.size() && is_b64tok(s[j])) {
    digit = digit || is_digit(s[j]);
    up = up || is_upper(s[j]);
    lo = lo || is_lower(s[j]);
    ++j;
  }
  size_t len = j - b;
  if (len < 8 || !(digit || (len >= 20 && up && lo)))
    return false;
  if (is_placeholder_value(s.substr(b, len)))
    return false;
  m.begin = b;
  m.end = j;
  m.replacement = "[REDACTED]";
  return true;
}

std::vector<std::string_view> key_prefixes() {
  std::vector<std::string_view> out;
  for (auto& k : key_shapes)
    out.push_back(k.prefix);
  return out;
}

void mark_shape_first_bytes(std::array<uint8_t, 256>& flags, uint8_t bit) {
  for (auto& k : key_shapes)
    flags[static_cast<unsigned char>(k.prefix[0])] |= bit;
}

} // namespace mibyan::redact_detail
