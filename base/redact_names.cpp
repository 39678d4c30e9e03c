#include "base/redact_names.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "base/env_filter.hpp"
#include "base/redact.hpp"
#include "base/strings.hpp"

namespace mibyan {

namespace redact_detail {

using namespace std::string_view_literals;

namespace {

// The last two words of a pair name, lower-cased: words are split at
// _ . - and camelCase humps. No allocation (names are at most 64 bytes).
struct name_tail {
  char last[65] = {};
  char prev[65] = {};
  size_t last_len = 0;
  size_t prev_len = 0;
  size_t words = 0;

  std::string_view last_word() const { return {last, last_len}; }
  std::string_view prev_word() const { return {prev, prev_len}; }
};

name_tail split_tail(std::string_view name) {
  name_tail t;
  char cur[65];
  size_t len = 0;
  auto flush = [&] {
    if (len == 0)
      return;
    std::memcpy(t.prev, t.last, t.last_len);
    t.prev_len = t.last_len;
    std::memcpy(t.last, cur, len);
    t.last_len = len;
    ++t.words;
    len = 0;
  };
  for (size_t i = 0; i < name.size() && i < 64; ++i) {
    char c = name[i];
    if (c == '_' || c == '.' || c == '-') {
      flush();
      continue;
    }
    if (is_upper(c) && i > 0 && is_lower(name[i - 1]))
      flush();
    cur[len++] = lower(c);
  }
  flush();
  return t;
}

// Words in front of "key" that make it a credential in lower/camelCase
// names (in UPPER_SNAKE names, which are environment style, any qualifier
// but "public" does).
const char* const key_qualifiers[] = {
  "api",     "secret",  "private", "access",  "signing", "encryption",
  "master",  "client",  "app",     "auth",    "service", "account",
  "license", "session", "admin",   "webhook", "deploy",  "x",
};

} // namespace

// Whether a pair called `name` holds a secret. Decided by its last word so
// that max_tokens, token_type, secret_name, author, public_key, sort_key
// and password_file stay visible.
bool is_secret_pair_name(std::string_view name) {
  if (name.size() < 3 || name.size() > 64)
    return false;
  // Cheapest filter: the last letters of the endings below.
  if (!may_end_secret_pair_name(name.back()))
    return false;
  // Cheap filter: every secret last word ends in one of these.
  char t3[3] = {lower(name[name.size() - 3]), lower(name[name.size() - 2]),
                lower(name[name.size() - 1])};
  std::string_view tail{t3, 3};
  static constexpr std::string_view endings[] = {
    "ken", "ret", "ord", "swd", "ase", "key", "pwd", "ass",
    "uth", "ion", "ial", "als", "eds", "dsn", "kie"};
  if (std::find(std::begin(endings), std::end(endings), tail)
      == std::end(endings))
    return false;
  auto t = split_tail(name);
  if (t.words == 0)
    return false;
  auto last = t.last_word();
  for (auto s : {"token"sv, "secret"sv, "password"sv, "passwd"sv,
                 "passphrase"sv, "apikey"sv, "secretkey"sv, "privatekey"sv,
                 "accesskey"sv})
    if (strings::ends_with(last, s))
      return true;
  if (last == "pwd" && t.words >= 2)
    return true; // DB_PWD, not the shell's PWD
  for (auto s : {"pass"sv, "auth"sv, "authorization"sv, "credential"sv,
                 "credentials"sv, "creds"sv, "dsn"sv, "cookie"sv})
    if (last == s)
      return true;
  if (last == "key" && t.words >= 2) {
    auto q = t.prev_word();
    bool upper_name = std::none_of(name.begin(), name.end(), is_lower);
    if (upper_name)
      return q != "public";
    for (auto k : key_qualifiers)
      if (q == k)
        return true;
  }
  return false;
}

// Values that are placeholders or references, not secrets.
bool is_placeholder_value(std::string_view v) {
  if (v.size() < 4)
    return true;
  char c = v.front();
  if (c == '$' || c == '<' || c == '%' || c == '{' || c == '*')
    return true;
  if (v.rfind("[REDACTED", 0) == 0)
    return true;
  if (std::all_of(v.begin(), v.end(), [&](char x) { return x == c; }))
    return true;
  if (v.size() < 12 && std::all_of(v.begin(), v.end(), is_digit))
    return true;
  for (auto w : {"null"sv, "none"sv, "true"sv, "false"sv, "undefined"sv,
                 "nil"sv, "redacted"sv, "hidden"sv, "masked"sv})
    if (strings::iequals(v, w))
      return true;
  return false;
}

// An identifier or dotted reference (self.token, os.environ, string): in
// code, an unquoted value like this names something instead of holding it.
bool is_reference_like(std::string_view v) {
  if (v.empty() || !(is_alpha(v.front()) || v.front() == '_'))
    return false;
  bool digit = false;
  for (char c : v) {
    if (is_digit(c))
      digit = true;
    else if (!(is_alpha(c) || c == '_' || c == '.'))
      return false;
  }
  return !digit;
}

} // namespace redact_detail

namespace {

// Secret-shaped environment names (the env scrubber's secret block).
const char* const secret_env_markers[] = {
  "KEY",  "TOKEN", "SECRET",  "PASSWORD", "PASSWD", "CREDENTIAL",
  "AUTH", "DSN",   "WEBHOOK", "CREDS",    "BEARER", "APIKEY",
};

} // namespace

bool is_secret_variable_name(std::string_view name) {
  using namespace redact_detail;
  if (name.empty())
    return false;
  std::string u;
  u.reserve(name.size());
  for (char c : name)
    u.push_back(is_lower(c) ? static_cast<char>(c - 'a' + 'A') : c);
  for (auto s : {"_SOCK", "_PATH", "_FILE", "_DIR", "_SOCKET"})
    if (strings::ends_with(u, s))
      return false;
  if (is_provider_credential(name) || is_secret_env_name(name))
    return true;
  for (auto m : secret_env_markers)
    if (u.find(m) != std::string::npos)
      return true;
  return false;
}

} // namespace mibyan
