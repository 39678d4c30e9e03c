#include "base/redact_blocks.hpp"

#include <cstring>

#include "base/redact_names.hpp"
#include "base/strings.hpp"

namespace mibyan::redact_detail {

namespace {

using namespace std::string_view_literals;

bool starts_at(std::string_view s, size_t i, std::string_view lit) {
  return s.size() - i >= lit.size()
         && std::memcmp(s.data() + i, lit.data(), lit.size()) == 0;
}

// The label after "-----BEGIN " or "-----END " at `j`: up to 48 characters
// of [A-Z0-9 ] ending in PRIVATE KEY (or PRIVATE KEY BLOCK, PGP) and
// followed by "-----". Returns the position after the dashes, or 0.
size_t private_key_label(std::string_view s, size_t j) {
  size_t b = j;
  while (j < s.size() && j - b < 48
         && (is_upper(s[j]) || is_digit(s[j]) || s[j] == ' '))
    ++j;
  auto label = s.substr(b, j - b);
  if (!(strings::ends_with(label, "PRIVATE KEY")
        || strings::ends_with(label, "PRIVATE KEY BLOCK")))
    return 0;
  if (!starts_at(s, j, "-----"))
    return 0;
  return j + 5;
}

// An escaped line break: the two characters "\n" or "\r" (bytes reprs,
// JSON strings).
bool escaped_break(std::string_view s, size_t k) {
  return s[k] == '\\' && k + 1 < s.size()
         && (s[k + 1] == 'n' || s[k + 1] == 'r');
}

// The end of a PEM header line ("Proc-Type: 4,ENCRYPTED") starting at
// `k`, or 0 when the line is none.
size_t header_line_end(std::string_view s, size_t k) {
  size_t e = k;
  while (e < s.size() && e - k < 128 && s[e] != '\n' && !escaped_break(s, e))
    ++e;
  if (e - k >= 128 || e == k)
    return 0;
  auto line = s.substr(k, e - k);
  auto colon = line.find(": ");
  if (colon == std::string_view::npos || colon == 0)
    return 0;
  for (size_t x = 0; x < colon; ++x)
    if (!(is_alnum(line[x]) || line[x] == '-'))
      return 0;
  return e;
}

constexpr std::string_view netrc_words[] = {"machine", "default", "login",
                                             "password", "account",
                                             "macdef"};

bool is_netrc_word(std::string_view w) {
  for (auto x : netrc_words)
    if (w == x)
      return true;
  return false;
}

// Splits the line [b, e) into space-separated words (at most `max`).
size_t line_words(std::string_view s, size_t b, size_t e,
                  std::string_view* words, size_t max) {
  size_t count = 0;
  size_t k = b;
  while (k < e && count < max) {
    while (k < e && (is_space(s[k]) || s[k] == '\r'))
      ++k;
    if (k >= e)
      break;
    size_t w = k;
    while (k < e && !is_space(s[k]) && s[k] != '\r')
      ++k;
    words[count++] = s.substr(w, k - w);
  }
  return count;
}

// What a line's words (up to the password token) say about a .netrc
// entry.
struct netrc_line {
  bool valid = false;   // follows the grammar
  bool opens = false;   // starts with `machine <host>` or `default`
  bool trusted = false; // `default`, a host name with '.' or ':', or a
                        // `login` keyword (not prose like "machine
                        // learning password ...")
};

// An optional leading `machine <host>` or `default`, then keyword-value
// pairs.
netrc_line netrc_grammar(const std::string_view* words, size_t count) {
  netrc_line r;
  size_t k = 0;
  if (count > 0 && words[0] == "default") {
    r.opens = r.trusted = true;
    k = 1;
  } else if (count > 0 && words[0] == "machine") {
    if (count < 2)
      return r;
    r.opens = true;
    auto host = words[1];
    r.trusted = host.find_first_of(".:") != std::string_view::npos
                || host == "localhost";
    k = 2;
  }
  for (; k < count; k += 2) {
    if (!is_netrc_word(words[k]) || words[k] == "machine"
        || words[k] == "default" || k + 1 >= count)
      return r;
    if (words[k] == "login")
      r.trusted = true;
  }
  r.valid = true;
  return r;
}

} // namespace

bool pem_begin_block(std::string_view s, size_t i, block_span& out) {
  constexpr std::string_view begin_tag = "-----BEGIN ";
  if (!starts_at(s, i, begin_tag))
    return false;
  size_t body = private_key_label(s, i + begin_tag.size());
  if (body == 0)
    return false;
  out.begin = body;
  {
    size_t k = body;
    while (k < s.size() && (s[k] == '\r' || s[k] == '\n' || s[k] == ' '))
      ++k;
    while (escaped_break(s, k))
      k += 2;
    if (starts_at(s, k, "[REDACTED"))
      return false; // already redacted
  }
  auto end_pos = s.find("-----END ", body);
  if (end_pos != std::string_view::npos) {
    out.end = end_pos;
    return true;
  }
  // Cut off (truncated output): the body runs while it looks like PEM.
  size_t k = body;
  bool line_start = true;
  while (k < s.size()) {
    char c = s[k];
    if (c == '\n' || c == '\r') {
      ++k;
      line_start = true;
      continue;
    }
    if (escaped_break(s, k)) {
      k += 2;
      line_start = true;
      continue;
    }
    if (line_start) {
      line_start = false;
      if (auto e = header_line_end(s, k); e != 0) {
        k = e;
        continue;
      }
    }
    if (is_b64(c) || c == '=' || c == ' ' || c == '\t') {
      ++k;
      continue;
    }
    // The separator of a list of lines printed as a repr.
    bool sep = false;
    for (auto lit : {"', b'"sv, "', '"sv, "\", b\""sv, "\", \""sv})
      if (starts_at(s, k, lit)) {
        k += lit.size();
        sep = line_start = true;
        break;
      }
    if (!sep)
      break;
  }
  out.end = k;
  return true;
}

bool pem_orphan_end(std::string_view s, size_t i, block_span& out) {
  constexpr std::string_view end_tag = "-----END ";
  if (!starts_at(s, i, end_tag)
      || private_key_label(s, i + end_tag.size()) == 0)
    return false;
  size_t k = i;
  size_t last = 0;   // end of the last base64 character
  size_t first = 0;  // start of the first one
  size_t count = 0;
  while (k > 0 && i - k < (1u << 16)) {
    char c = s[k - 1];
    if (c == '\n' || c == '\r' || c == ' ' || c == '\t') {
      --k;
      continue;
    }
    if ((c == 'n' || c == 'r') && k >= 2 && s[k - 2] == '\\') {
      k -= 2;
      continue;
    }
    if (!(is_b64(c) || c == '=' || c == ':' || c == ','))
      break;
    if (count == 0)
      last = k;
    --k;
    ++count;
    first = k;
  }
  if (count < 16)
    return false;
  out.begin = first;
  out.end = last;
  return true;
}

bool netrc_password(std::string_view s, size_t i, block_span& out) {
  constexpr std::string_view word = "password";
  if (!starts_at(s, i, word) || i + word.size() >= s.size()
      || !is_space(s[i + word.size()]))
    return false;
  // The value.
  size_t j = i + word.size();
  while (j < s.size() && is_space(s[j]))
    ++j;
  size_t vb = j, ve = j;
  if (j < s.size() && s[j] == '"') {
    vb = ++j;
    while (j < s.size() && s[j] != '"' && s[j] != '\n')
      ++j;
    if (j >= s.size() || s[j] != '"')
      return false;
    ve = j;
  } else {
    while (j < s.size() && !is_space(s[j]) && s[j] != '\n' && s[j] != '\r')
      ++j;
    ve = j;
  }
  if (ve - vb < 4 || is_placeholder_value(s.substr(vb, ve - vb)))
    return false;
  // The line up to the password token must follow the grammar.
  size_t ls = s.rfind('\n', i);
  ls = ls == std::string_view::npos ? 0 : ls + 1;
  std::string_view words[16];
  size_t count = line_words(s, ls, i, words, 16);
  if (count >= 16)
    return false;
  auto line = netrc_grammar(words, count);
  if (!line.valid)
    return false;
  bool opens = line.opens;
  bool trusted = line.trusted;
  // A continuation line: an earlier line (within a few) opens the entry.
  size_t le = ls;
  for (int back = 0; !opens && back < 8 && le > 0; ++back) {
    size_t pe = le - 1; // the '\n' ending the previous line
    size_t ps = pe == 0 ? std::string_view::npos : s.rfind('\n', pe - 1);
    ps = ps == std::string_view::npos ? 0 : ps + 1;
    count = line_words(s, ps, pe, words, 16);
    le = ps;
    if (count == 0)
      continue;
    if (count >= 16)
      return false;
    auto prev = netrc_grammar(words, count);
    if (!prev.valid)
      return false;
    opens = prev.opens;
    trusted = trusted || prev.trusted;
  }
  if (!opens || !trusted)
    return false;
  out.begin = vb;
  out.end = ve;
  return true;
}

} // namespace mibyan::redact_detail
