#include "tools/html/html_lexing.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

#include "base/utf8.hpp"

namespace mibyan::html_detail {

// -- character helpers --------------------------------------------------------

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'
         || c == '\v';
}

bool is_alpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

bool is_alnum(char c) {
  return is_alpha(c) || (c >= '0' && c <= '9');
}

char to_lower(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

bool istarts_with(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size()
         && strings::iequals(s.substr(0, prefix.size()), prefix);
}

namespace {

// -- entities -----------------------------------------------------------------

struct named_entity {
  const char* name;
  uint32_t code_point;
};

// Sorted by name (checked once at first use).
constexpr named_entity named_entities[] = {
  {"AElig", 0xC6},   {"Aacute", 0xC1},  {"Agrave", 0xC0},  {"Auml", 0xC4},
  {"Ccedil", 0xC7},  {"Eacute", 0xC9},  {"Egrave", 0xC8},  {"Ntilde", 0xD1},
  {"Oacute", 0xD3},  {"Ouml", 0xD6},    {"Uacute", 0xDA},  {"Uuml", 0xDC},
  {"aacute", 0xE1},  {"acirc", 0xE2},   {"aelig", 0xE6},   {"agrave", 0xE0},
  {"amp", 0x26},     {"apos", 0x27},    {"aring", 0xE5},   {"atilde", 0xE3},
  {"auml", 0xE4},    {"bdquo", 0x201E}, {"bull", 0x2022},  {"ccedil", 0xE7},
  {"cent", 0xA2},    {"check", 0x2713}, {"copy", 0xA9},    {"dagger", 0x2020},
  {"darr", 0x2193},  {"deg", 0xB0},     {"divide", 0xF7},  {"eacute", 0xE9},
  {"ecirc", 0xEA},   {"egrave", 0xE8},  {"emsp", 0x2003},  {"ensp", 0x2002},
  {"euml", 0xEB},    {"euro", 0x20AC},  {"frac12", 0xBD},  {"frac14", 0xBC},
  {"frac34", 0xBE},  {"ge", 0x2265},    {"gt", 0x3E},      {"harr", 0x2194},
  {"hearts", 0x2665}, {"hellip", 0x2026}, {"iacute", 0xED}, {"icirc", 0xEE},
  {"iexcl", 0xA1},   {"igrave", 0xEC},  {"infin", 0x221E}, {"iquest", 0xBF},
  {"iuml", 0xEF},    {"laquo", 0xAB},   {"larr", 0x2190},  {"ldquo", 0x201C},
  {"le", 0x2264},    {"lsaquo", 0x2039}, {"lsquo", 0x2018}, {"lt", 0x3C},
  {"mdash", 0x2014}, {"micro", 0xB5},   {"middot", 0xB7},  {"minus", 0x2212},
  {"nbsp", 0xA0},    {"ndash", 0x2013}, {"ne", 0x2260},    {"not", 0xAC},
  {"ntilde", 0xF1},  {"oacute", 0xF3},  {"ocirc", 0xF4},   {"ograve", 0xF2},
  {"ordf", 0xAA},    {"ordm", 0xBA},    {"oslash", 0xF8},  {"otilde", 0xF5},
  {"ouml", 0xF6},    {"para", 0xB6},    {"plusmn", 0xB1},  {"pound", 0xA3},
  {"quot", 0x22},    {"raquo", 0xBB},   {"rarr", 0x2192},  {"rdquo", 0x201D},
  {"reg", 0xAE},     {"rsaquo", 0x203A}, {"rsquo", 0x2019}, {"sbquo", 0x201A},
  {"sect", 0xA7},    {"shy", 0xAD},     {"sup1", 0xB9},    {"sup2", 0xB2},
  {"sup3", 0xB3},    {"szlig", 0xDF},   {"thinsp", 0x2009}, {"times", 0xD7},
  {"trade", 0x2122}, {"uacute", 0xFA},  {"uarr", 0x2191},  {"ucirc", 0xFB},
  {"ugrave", 0xF9},  {"uuml", 0xFC},    {"yacute", 0xFD},  {"yen", 0xA5},
  {"yuml", 0xFF},    {"zwj", 0x200D},   {"zwnj", 0x200C},
};

const named_entity* find_entity(std::string_view name) {
  auto first = std::begin(named_entities);
  auto last = std::end(named_entities);
  auto i = std::lower_bound(first, last, name,
                            [](const named_entity& e, std::string_view n) {
                              return std::string_view{e.name} < n;
                            });
  if (i != last && std::string_view{i->name} == name)
    return i;
  return nullptr;
}

// Windows-1252 meanings of the C1 range in numeric references, as browsers
// decode them.
uint32_t c1_replacement(uint32_t cp) {
  static constexpr uint16_t table[32] = {
    0x20AC, 0x81,   0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021,
    0x02C6, 0x2030, 0x0160, 0x2039, 0x0152, 0x8D,   0x017D, 0x8F,
    0x90,   0x2018, 0x2019, 0x201C, 0x201D, 0x2022, 0x2013, 0x2014,
    0x02DC, 0x2122, 0x0161, 0x203A, 0x0153, 0x9D,   0x017E, 0x0178,
  };
  return (cp >= 0x80 && cp <= 0x9F) ? table[cp - 0x80] : cp;
}

// Decodes the reference at s[i] == '&'. Appends the result and returns the
// number of input bytes consumed (1 when it is no reference: "&" is kept).
size_t decode_reference(std::string_view s, size_t i, std::string& out,
                        bool nbsp_as_space, bool in_attribute) {
  auto n = s.size();
  size_t j = i + 1;
  if (j < n && s[j] == '#') {
    ++j;
    bool hex = j < n && (s[j] == 'x' || s[j] == 'X');
    if (hex)
      ++j;
    uint32_t cp = 0;
    size_t digits = 0;
    while (j < n) {
      char c = s[j];
      int d = -1;
      if (c >= '0' && c <= '9')
        d = c - '0';
      else if (hex && c >= 'a' && c <= 'f')
        d = c - 'a' + 10;
      else if (hex && c >= 'A' && c <= 'F')
        d = c - 'A' + 10;
      if (d < 0)
        break;
      if (cp <= 0x10FFFF)
        cp = cp * (hex ? 16 : 10) + static_cast<uint32_t>(d);
      ++digits;
      ++j;
    }
    if (digits == 0) {
      out += '&';
      return 1;
    }
    if (j < n && s[j] == ';')
      ++j;
    cp = c1_replacement(cp);
    if (nbsp_as_space && cp == 0xA0)
      out += ' ';
    else if (cp < 0x20 && cp != '\t' && cp != '\n' && cp != '\r')
      append_utf8(out, 0xFFFD);
    else
      append_utf8(out, cp);
    return j - i;
  }
  while (j < n && j - i <= 32 && is_alnum(s[j]))
    ++j;
  auto name = s.substr(i + 1, j - i - 1);
  if (name.empty()) {
    out += '&';
    return 1;
  }
  bool semicolon = j < n && s[j] == ';';
  const named_entity* e = semicolon ? find_entity(name) : nullptr;
  if (e == nullptr) {
    // Browsers also accept a few legacy names without ';', even followed
    // by other characters ("&copy2024"), except inside attribute values
    // where "&copy=" or "&copyx" stays literal (URLs).
    semicolon = false;
    for (auto legacy : {"amp", "lt", "gt", "quot", "nbsp", "copy", "reg"}) {
      std::string_view l{legacy};
      if (name.size() >= l.size() && name.compare(0, l.size(), l) == 0) {
        auto next = i + 1 + l.size();
        bool blocked = in_attribute && next < n
                       && (is_alnum(s[next]) || s[next] == '=');
        if (!blocked) {
          e = find_entity(l);
          j = next;
        }
        break;
      }
    }
  }
  if (e == nullptr) {
    out += '&';
    return 1;
  }
  if (e->code_point == 0xA0 && nbsp_as_space)
    out += ' ';
  else if (e->code_point != 0xAD)  // soft hyphen: invisible
    append_utf8(out, e->code_point);
  return j - i + (semicolon ? 1 : 0);
}

} // namespace

std::string decode(std::string_view s, bool nbsp_as_space, bool in_attr) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    if (s[i] == '&') {
      i += decode_reference(s, i, out, nbsp_as_space, in_attr);
    } else {
      auto amp = s.find('&', i);
      auto end = amp == std::string_view::npos ? s.size() : amp;
      out.append(s.data() + i, end - i);
      i = end;
    }
  }
  return out;
}

std::string collapse_spaces(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (is_space(c)) {
      if (!out.empty() && out.back() != ' ')
        out += ' ';
    } else {
      out += c;
    }
  }
  while (!out.empty() && out.back() == ' ')
    out.pop_back();
  return out;
}

// -- URL resolution -----------------------------------------------------------

curlu_ptr parse_base(std::string_view base) {
  // Without libcurl nothing resolves: links stay as written.
  if (base.empty() || !curl_lib().ok())
    return nullptr;
  curlu_ptr h{curl_api().url()};
  if (!h)
    return nullptr;
  std::string text{base};
  if (curl_api().url_set(h.get(), CURLUPART_URL, text.c_str(), 0) != CURLUE_OK)
    return nullptr;
  return h;
}

std::string resolve_with(CURLU* base, std::string_view ref) {
  auto trimmed = strings::trim_view(ref, strings::ascii_space);
  std::string r{trimmed};
  if (base == nullptr || r.empty())
    return r;
  curlu_ptr h{curl_api().url_dup(base)};
  if (!h)
    return r;
  if (curl_api().url_set(h.get(), CURLUPART_URL, r.c_str(),
                   CURLU_NON_SUPPORT_SCHEME)
      != CURLUE_OK)
    return r;
  char* out = nullptr;
  if (curl_api().url_get(h.get(), CURLUPART_URL, &out, 0) != CURLUE_OK
      || out == nullptr)
    return r;
  std::string result{out};
  curl_api().free(out);
  return result;
}
} // namespace mibyan::html_detail
