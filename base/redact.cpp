#include "base/redact.hpp"

#include <algorithm>
#include <array>
#include <cstring>

#include "base/base64.hpp"
#include "base/env_filter.hpp"
#include "base/redact_base64.hpp"
#include "base/redact_blocks.hpp"
#include "base/redact_events.hpp"
#include "base/redact_literals.hpp"
#include "base/redact_names.hpp"
#include "base/redact_normalize.hpp"
#include "base/redact_shapes.hpp"
#include "base/strings.hpp"

namespace mibyan {

namespace {

using namespace std::string_view_literals;
using namespace redact_detail;

// is_tok as a table, for the hot loop.
struct tok_table {
  bool t[256] = {};
  constexpr tok_table() {
    for (int c = 0; c < 256; ++c)
      t[c] = is_tok(static_cast<char>(c));
  }
};
constexpr tok_table tok_bytes{};
inline bool tok_byte(char c) {
  return tok_bytes.t[static_cast<unsigned char>(c)];
}

// Characters of a pair name: [A-Za-z0-9_.-].
constexpr bool is_name(char c) {
  return is_tok(c) || c == '.';
}

// ---------------------------------------------------------------------------
// The matcher

constexpr uint8_t f_shape = 2;  // first byte of a shape (a token start)
constexpr uint8_t f_pair = 4;   // '=' or ':'
constexpr uint8_t f_join = 8;   // '+' or '/': base64 goes on
constexpr uint8_t f_escape = 16; // '\\': maybe an escaped line break

} // namespace

struct redactor::impl {
  std::vector<secret> secrets;          // longest value first
  // Finds the secrets' values, numbered as `secrets`.
  literal_index literals;
  // The base64 fragments of the secrets (base/redact_base64.hpp).
  base64_fragment_index fragments;
  std::array<uint8_t, 256> flags{};
  // Where the scan's rules may start (base/redact_events.hpp).
  event_finder events;

  void build() {
    std::sort(secrets.begin(), secrets.end(),
              [](const secret& a, const secret& b) {
                return a.value.size() > b.value.size();
              });
    for (uint32_t k = 0; k < secrets.size(); ++k) {
      fragments.add(secrets[k].value, k);
      literals.add(secrets[k].value);
    }
    flags.fill(0);
    mark_shape_first_bytes(flags, f_shape);
    for (char c : {'e', 'B', 'b', '-', 'p'})
      flags[static_cast<unsigned char>(c)] |= f_shape;
    flags['='] |= f_pair;
    flags[':'] |= f_pair;
    flags['+'] |= f_join;
    flags['/'] |= f_join;
    flags['\\'] |= f_escape;
    // The literal starts of the rules that shape() tries at a token
    // start; every rule at a non-token byte is a rule byte of the finder.
    for (auto p : key_prefixes())
      events.add_prefix(p);
    events.add_prefix("-----"); // pem
    events.add_prefix("eyJ");   // jwt
    events.add_prefix("bearer", true);
    events.add_prefix("password"); // netrc_password
  }

  /// Appends the matches in `s` to `out` in scanning order (a match may
  /// start before the end of the previous one; the caller clamps). With
  /// `out` null, stops at the first match. `depth` > 0 scans decoded
  /// base64 (no further decoding).
  bool scan(std::string_view s, int depth, std::vector<match>* out) const;
  /// Whether decoded bytes hold a secret.
  // The rules, tried at candidate positions of the scan (kept out of
  // line so that the scan's hot loop stays small).
  __attribute__((noinline)) bool decoded_secret(std::string_view b) const;
  bool shape(std::string_view s, size_t i, match& m) const;
  __attribute__((noinline)) bool pem(std::string_view s, size_t i,
                                     match& m) const;
  __attribute__((noinline)) bool pair(std::string_view s, size_t i,
                                      match& m) const;
  bool url(std::string_view s, size_t i, match& m) const;
  /// A base64 run starting at `i` holding a secret; sets `examined` to
  /// the end of the run.
  __attribute__((noinline)) bool blob(std::string_view s, size_t i,
                                      size_t& examined, match& m) const;
};

namespace {

// Whether position `i` starts a token (the previous byte is no key byte).
bool at_boundary(std::string_view s, size_t i) {
  return i == 0 || !tok_byte(s[i - 1]);
}

bool starts_at(std::string_view s, size_t i, std::string_view lit) {
  return s.size() - i >= lit.size()
         && std::memcmp(s.data() + i, lit.data(), lit.size()) == 0;
}

} // namespace

// PEM private-key blocks (base/redact_blocks.hpp).
bool redactor::impl::pem(std::string_view s, size_t i, match& m) const {
  block_span b;
  if (pem_begin_block(s, i, b)) {
    m.begin = b.begin;
    m.end = b.end;
    m.replacement = "\n[REDACTED PRIVATE KEY]\n";
    return true;
  }
  if (pem_orphan_end(s, i, b)) {
    m.begin = b.begin;
    m.end = b.end;
    m.replacement = "[REDACTED PRIVATE KEY]";
    return true;
  }
  return false;
}

bool redactor::impl::shape(std::string_view s, size_t i, match& m) const {
  char c = s[i];
  if (c == '-')
    return pem(s, i, m);
  if (!at_boundary(s, i))
    return false;
  if (c == 'B' || c == 'b') {
    if (bearer(s, i, m))
      return true;
  }
  if (c == 'e' && jwt(s, i, m))
    return true;
  if (c == 'p') {
    block_span b;
    if (netrc_password(s, i, b)) {
      m.begin = b.begin;
      m.end = b.end;
      m.replacement = "[REDACTED]";
      return true;
    }
  }
  return prefixed_key(s, i, m);
}

// scheme://user:password@host
bool redactor::impl::url(std::string_view s, size_t i, match& m) const {
  if (!starts_at(s, i, "://"))
    return false;
  size_t k = i;
  while (k > 0 && (is_alnum(s[k - 1]) || s[k - 1] == '+' || s[k - 1] == '.'
                   || s[k - 1] == '-'))
    --k;
  if (i - k < 2 || !is_alpha(s[k]))
    return false;
  size_t a = i + 3;
  size_t j = a;
  size_t at = std::string_view::npos;
  size_t colon = std::string_view::npos;
  while (j < s.size()) {
    char c = s[j];
    if (c == '/' || c == '?' || c == '#' || c == ' ' || c == '\t'
        || c == '\n' || c == '\r' || c == '"' || c == '\'' || c == '<'
        || c == '>' || c == '`')
      break;
    if (c == '@')
      at = j;
    else if (c == ':' && colon == std::string_view::npos)
      colon = j;
    ++j;
  }
  if (at == std::string_view::npos || colon == std::string_view::npos
      || colon > at || at - colon < 2)
    return false;
  auto pw = s.substr(colon + 1, at - colon - 1);
  char p0 = pw.front();
  if (p0 == '$' || p0 == '<' || p0 == '{' || p0 == '*'
      || pw.rfind("[REDACTED", 0) == 0)
    return false;
  m.begin = colon + 1;
  m.end = at;
  m.replacement = "[REDACTED]";
  return true;
}

// NAME=value, NAME: value, "name": "value", name = 'value'
bool redactor::impl::pair(std::string_view s, size_t i, match& m) const {
  char sep = s[i];
  if (sep == ':' && starts_at(s, i, "://"))
    return url(s, i, m);
  // -- the name, backwards: optional spaces, optional closing quote ------
  size_t k = i;
  while (k > 0 && is_space(s[k - 1]) && i - k < 8)
    --k;
  char quote = 0;
  if (k > 0 && (s[k - 1] == '"' || s[k - 1] == '\'')) {
    quote = s[k - 1];
    --k;
  }
  size_t name_end = k;
  while (k > 0 && is_name(s[k - 1]) && name_end - k <= 64)
    --k;
  if (k == name_end || name_end - k > 64)
    return false;
  if (quote && (k == 0 || s[k - 1] != quote))
    return false;
  if (!quote && k > 0 && (is_alnum(s[k - 1])))
    return false;
  auto name = s.substr(k, name_end - k);
  if (sep == '=' && i + 1 < s.size() && s[i + 1] == '=')
    return false; // comparison ==
  if (sep == '=' && k > 0 && !quote
      && (s[k - 1] == '!' || s[k - 1] == '<' || s[k - 1] == '>'))
    return false;
  if (!is_secret_pair_name(name))
    return false;
  // -- the value ----------------------------------------------------------
  size_t j = i + 1;
  while (j < s.size() && is_space(s[j]) && j - i < 8)
    ++j;
  if (j >= s.size())
    return false;
  char vq = s[j];
  size_t vb, ve;
  if (vq == '"' || vq == '\'' || vq == '`') {
    vb = j + 1;
    ve = vb;
    while (ve < s.size() && s[ve] != vq && s[ve] != '\n') {
      if (s[ve] == '\\' && ve + 1 < s.size() && s[ve + 1] != '\n')
        ++ve;
      ++ve;
    }
    if (ve >= s.size() || s[ve] != vq)
      return false;
    if (is_placeholder_value(s.substr(vb, ve - vb)))
      return false;
  } else {
    vb = j;
    ve = vb;
    bool to_eol = sep == ':';
    while (ve < s.size()) {
      char c = s[ve];
      if (c == '\n' || c == '\r' || c == ',' || c == ';' || c == '"'
          || c == '\'' || c == '`' || c == '(' || c == ')' || c == '['
          || c == ']' || c == '{' || c == '}' || c == '<' || c == '>'
          || c == '&')
        break;
      if (is_space(c) && (!to_eol || (ve + 1 < s.size() && s[ve + 1] == '#')))
        break;
      ++ve;
    }
    while (ve > vb && is_space(s[ve - 1]))
      --ve;
    auto v = s.substr(vb, ve - vb);
    if (is_placeholder_value(v))
      return false;
    if (ve < s.size() && (s[ve] == '(' || s[ve] == '['))
      return false; // a call or subscript: code, not a value
    bool env_style = sep == '=' && !quote
                     && std::none_of(name.begin(), name.end(), is_lower);
    if (!env_style && is_reference_like(v))
      return false;
    if (!env_style && v.find(' ') != std::string_view::npos) {
      // A multi-word YAML value: keep the scheme word of an
      // Authorization-style value ("Bearer x", "Basic x") visible.
      auto sp = v.find(' ');
      auto first = v.substr(0, sp);
      if (strings::iequals(first, "bearer") || strings::iequals(first, "basic")
          || strings::iequals(first, "token")) {
        vb += sp + 1;
        while (vb < ve && is_space(s[vb]))
          ++vb;
        if (is_placeholder_value(s.substr(vb, ve - vb)))
          return false;
      }
    }
  }
  m.begin = vb;
  m.end = ve;
  m.replacement = "[REDACTED]";
  return true;
}

redactor::redactor() : impl_(std::make_unique<impl>()) {
  impl_->build();
}

redactor::redactor(std::vector<secret> secrets)
  : impl_(std::make_unique<impl>()) {
  for (auto& s : secrets) {
    if (s.value.size() < min_secret_value_length)
      continue;
    bool dup = std::any_of(impl_->secrets.begin(), impl_->secrets.end(),
                           [&](const secret& x) { return x.value == s.value; });
    if (!dup)
      impl_->secrets.push_back(std::move(s));
  }
  impl_->build();
}

redactor::~redactor() = default;
redactor::redactor(redactor&&) noexcept = default;
redactor& redactor::operator=(redactor&&) noexcept = default;

redactor redactor::from_environment(
  const std::vector<std::string>& env,
  const std::map<std::string, std::string>& extra,
  const std::vector<std::pair<std::string, std::string>>& literals) {
  std::vector<secret> secrets;
  for (auto& e : env) {
    auto eq = e.find('=');
    if (eq == std::string::npos || eq == 0)
      continue;
    std::string_view name{e.data(), eq};
    if (is_secret_variable_name(name))
      secrets.push_back({std::string{name}, e.substr(eq + 1)});
  }
  for (auto& [name, value] : extra)
    if (is_secret_variable_name(name))
      secrets.push_back({name, value});
  for (auto& [name, value] : literals)
    secrets.push_back({name, value});
  return redactor{std::move(secrets)};
}

bool redactor::redact(std::string& text) const {
  std::string out;
  if (!redact_to(text, out))
    return false;
  text = std::move(out);
  return true;
}

// A base64 run starting at `i` whose decoded bytes hold a secret
// (base/redact_base64.hpp).
bool redactor::impl::blob(std::string_view s, size_t i, size_t& examined,
                          match& m) const {
  if (i > 0 && is_b64(s[i - 1]))
    return false; // not the start of the run
  auto run = examine_base64_run(s, i);
  examined = run.end;
  m.begin = i;
  m.end = run.padded_end;
  if (!fragments.empty() && run.end - i >= 10 && run.mixed_case) {
    auto id = fragments.find(s.substr(i, run.end - i));
    if (id >= 0) {
      m.replacement = "[REDACTED:" + secrets[static_cast<size_t>(id)].name
                      + "]";
      return true;
    }
  }
  if (!run.decodable
      || !decoded_secret(base64_decode(s.substr(i, run.end - i))))
    return false;
  m.replacement = "[REDACTED]";
  return true;
}

bool redactor::impl::decoded_secret(std::string_view bytes) const {
  if (decoded_private_key(bytes))
    return true;
  if (is_plain_text(bytes))
    return scan(bytes, 1, nullptr);
  normalized_text nt;
  if (!normalize_for_redaction(bytes, nt))
    return scan(bytes, 1, nullptr);
  return scan(nt.text, 1, nullptr);
}

bool redactor::impl::scan(std::string_view s, int depth,
                          std::vector<match>* out) const {
  const size_t n = s.size();
  // Literal secrets: every occurrence, found up front
  // (base/redact_literals.hpp); earliest first, longest first at one
  // position.
  using hit = literal_hit;
  std::vector<hit> hits;
  literals.find_all(s, hits);
  std::sort(hits.begin(), hits.end(), [&](const hit& a, const hit& b) {
    if (a.pos != b.pos)
      return a.pos < b.pos;
    return secrets[a.idx].value.size() > secrets[b.idx].value.size();
  });
  constexpr size_t none = std::string_view::npos;
  size_t k = 0;
  size_t next_lit = hits.empty() ? none : hits[0].pos;
  bool any = false;
  match m;
  size_t i = 0;
  size_t floor = 0;      // end of the last match
  size_t blob_done = 0;  // end of the last base64 run examined
  event_cursor cursor{events, s};
  while (i < n) {
    if (i != next_lit && (i == 0 || !tok_byte(s[i - 1]) || !tok_byte(s[i]))) {
      // Skip to where a rule may start: the loop below would pass over
      // the bytes in between without a match.
      i = cursor.next(i, std::min(n, next_lit), depth > 0 ? none : blob_done);
      if (i >= n)
        break;
    }
    auto c = static_cast<unsigned char>(s[i]);
    bool matched = false;
    if (tok_byte(static_cast<char>(c))) {
      // Shapes start a token; inside a token only a literal can start.
      if ((flags[c] & f_shape) && at_boundary(s, i) && shape(s, i, m)) {
        matched = true;
      } else if (i != next_lit) {
        size_t start = i;
        ++i;
        while (i < n && i != next_lit && tok_byte(s[i]))
          ++i;
        // A long token: maybe base64 (runs with '+' and '/' start below).
        if (depth > 0 || i - start < 10 || start < blob_done
            || !blob(s, start, blob_done, m))
          continue;
        matched = true;
      }
    } else if (i != next_lit) {
      uint8_t f = flags[c];
      if (f == 0) {
        ++i;
        continue;
      }
      if ((f & f_pair) && pair(s, i, m)) {
        matched = true;
      } else if ((f & f_join) && depth == 0 && i >= blob_done) {
        // '+' or '/' inside a base64 run: examine it from its start.
        size_t b = i;
        while (b > floor && is_b64(s[b - 1]))
          --b;
        matched = b >= blob_done && blob(s, b, blob_done, m);
      } else if ((f & f_escape) && i + 2 < n
                 && (s[i + 1] == 'n' || s[i + 1] == 'r') && s[i + 2] == '-') {
        matched = pem(s, i + 2, m); // a PEM line after an escaped break
      }
      if (!matched) {
        ++i;
        continue;
      }
    }
    if (!matched) {
      // A literal secret starts here (shapes and pairs come first).
      if ((flags[c] & f_pair) && pair(s, i, m)) {
        matched = true;
      } else {
        const auto& sec = secrets[hits[k].idx];
        m.begin = i;
        m.end = i + sec.value.size();
        m.replacement = "[REDACTED:" + sec.name + "]";
      }
    }
    if (out == nullptr)
      return true;
    any = true;
    i = std::max(m.end, i + 1);
    floor = i;
    out->push_back(std::move(m));
    while (k < hits.size() && hits[k].pos < i)
      ++k;
    next_lit = k < hits.size() ? hits[k].pos : none;
  }
  return any;
}

namespace {

// Whether the source span [b, e) is UTF-16 text that is mostly ASCII
// (every second byte NUL, starting after the first).
bool utf16_span(std::string_view s, size_t b, size_t e) {
  if (e - b < 4)
    return false;
  for (size_t k = b + 1; k < e; k += 2)
    if (s[k] != '\0')
      return false;
  return true;
}

// Writes `s` with the spans of `ms` replaced to `out`. Spans are in
// scanning order; one that starts inside the previous one is clamped, and
// one left empty by that is dropped. With `utf16`, a replacement inside
// UTF-16 text is written as UTF-16 too.
void assemble(std::string_view s, std::vector<match>& ms, bool utf16,
              std::string& out) {
  out.reserve(s.size() + 64);
  size_t copied = 0;
  for (auto& m : ms) {
    if (m.begin < copied) {
      if (m.end <= copied)
        continue;
      m.begin = copied;
    }
    out.append(s.data() + copied, m.begin - copied);
    if (utf16 && utf16_span(s, m.begin, m.end)) {
      for (char c : m.replacement) {
        out.push_back(c);
        out.push_back('\0');
      }
    } else {
      out.append(m.replacement);
    }
    copied = m.end;
  }
  out.append(s.data() + copied, s.size() - copied);
}

} // namespace

bool redactor::redact_to(std::string_view s, std::string& out) const {
  out.clear();
  std::vector<match> ms;
  normalized_text nt;
  if (is_plain_text(s) || !normalize_for_redaction(s, nt)) {
    if (!impl_->scan(s, 0, &ms))
      return false;
    assemble(s, ms, false, out);
    return true;
  }
  // Matched on the normalised text (base/redact_normalize.hpp); replaced
  // in the original.
  if (!impl_->scan(nt.text, 0, &ms))
    return false;
  for (auto& m : ms) {
    size_t b = 0, e = 0;
    nt.source_span(m.begin, m.end, b, e);
    m.begin = b;
    m.end = e;
  }
  assemble(s, ms, true, out);
  return true;
}

std::string redactor::redacted(std::string_view text) const {
  std::string copy{text};
  redact(copy);
  return copy;
}

size_t redactor::secret_count() const {
  return impl_->secrets.size();
}

const redactor& process_redactor() {
  static const redactor r = redactor::from_environment(current_environment());
  return r;
}

} // namespace mibyan
