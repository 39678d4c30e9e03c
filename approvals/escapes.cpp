#include "approvals/escapes.hpp"

#include <cstdint>

#include "base/utf8.hpp"

namespace mibyan::approvals {

namespace {

// Reads up to `max` digits of `base` at s[i...]; advances i.
uint32_t read_number(std::string_view s, size_t& i, int base, size_t max) {
  uint32_t v = 0;
  size_t n = 0;
  while (i < s.size() && n < max) {
    int d = hex_digit_value(s[i]);
    if (d < 0 || d >= base)
      break;
    v = v * static_cast<uint32_t>(base) + static_cast<uint32_t>(d);
    ++i;
    ++n;
  }
  return v;
}

// Interprets the escape at s[i] (just after the backslash); advances i.
// `octal_zero`: echo -e / %b spell octal as \0NNN; printf and $'...' as
// \NNN. Returns false for an unknown escape (the caller keeps it).
bool decode_escape(std::string_view s, size_t& i, std::string& out,
                   bool octal_zero, bool& stop) {
  char c = s[i];
  switch (c) {
  case 'a': out.push_back('\a'); ++i; return true;
  case 'b': out.push_back('\b'); ++i; return true;
  case 'e':
  case 'E': out.push_back('\x1b'); ++i; return true;
  case 'f': out.push_back('\f'); ++i; return true;
  case 'n': out.push_back('\n'); ++i; return true;
  case 'r': out.push_back('\r'); ++i; return true;
  case 't': out.push_back('\t'); ++i; return true;
  case 'v': out.push_back('\v'); ++i; return true;
  case '\\': out.push_back('\\'); ++i; return true;
  case '\'': out.push_back('\''); ++i; return true;
  case '"': out.push_back('"'); ++i; return true;
  case '?': out.push_back('?'); ++i; return true;
  case 'c':
    if (octal_zero) { // echo -e: produce no further output
      stop = true;
      ++i;
      return true;
    }
    if (i + 1 < s.size()) {
      out.push_back(static_cast<char>(s[i + 1] & 0x1f));
      i += 2;
      return true;
    }
    return false;
  case 'x': {
    size_t j = i + 1;
    auto v = read_number(s, j, 16, 2);
    if (j == i + 1)
      return false;
    out.push_back(static_cast<char>(v));
    i = j;
    return true;
  }
  case 'u':
  case 'U': {
    size_t j = i + 1;
    auto v = read_number(s, j, 16, c == 'u' ? 4 : 8);
    if (j == i + 1)
      return false;
    append_utf8(out, v);
    i = j;
    return true;
  }
  default:
    break;
  }
  if (c >= '0' && c <= '7') {
    size_t j = i;
    if (octal_zero && c == '0')
      ++j;
    auto v = read_number(s, j, 8, 3);
    out.push_back(static_cast<char>(v & 0xff));
    i = j;
    return true;
  }
  return false;
}

std::string decode_escapes(std::string_view s, bool octal_zero, bool& stop) {
  std::string out;
  for (size_t i = 0; i < s.size() && out.size() < max_decoded && !stop;) {
    if (s[i] != '\\' || i + 1 >= s.size()) {
      out.push_back(s[i++]);
      continue;
    }
    ++i;
    if (!decode_escape(s, i, out, octal_zero, stop))
      out.push_back('\\');
  }
  return out;
}

} // namespace

std::string decode_ansi_c(std::string_view body) {
  bool stop = false;
  return decode_escapes(body, false, stop);
}

std::optional<std::string> printf_output(const std::vector<std::string>& args) {
  if (args.empty())
    return std::nullopt;
  const std::string& fmt = args[0];
  std::string out;
  size_t next = 1;
  bool stop = false;
  // The format is reused while arguments remain (bounded rounds).
  for (int round = 0; round < 64 && !stop; ++round) {
    bool consumed = false;
    for (size_t i = 0; i < fmt.size() && out.size() < max_decoded && !stop;) {
      char c = fmt[i];
      if (c == '\\' && i + 1 < fmt.size()) {
        ++i;
        if (!decode_escape(fmt, i, out, false, stop))
          out.push_back('\\');
        continue;
      }
      if (c != '%' || i + 1 >= fmt.size()) {
        out.push_back(c);
        ++i;
        continue;
      }
      ++i;
      if (fmt[i] == '%') {
        out.push_back('%');
        ++i;
        continue;
      }
      while (i < fmt.size()
             && std::string_view{"-+ #0123456789.*'"}.find(fmt[i])
                  != std::string_view::npos)
        ++i;
      if (i >= fmt.size())
        break;
      char conv = fmt[i++];
      std::string arg = next < args.size() ? args[next] : std::string{};
      if (next < args.size()) {
        ++next;
        consumed = true;
      }
      switch (conv) {
      case 's': out += arg; break;
      case 'b': {
        bool inner_stop = false;
        out += decode_escapes(arg, true, inner_stop);
        stop = inner_stop;
        break;
      }
      case 'c':
        if (!arg.empty())
          out.push_back(arg[0]);
        break;
      case 'q': out += arg; break;
      default: out += arg; break; // numbers: as written
      }
    }
    if (!consumed || next >= args.size())
      break;
  }
  if (out.size() > max_decoded)
    out.resize(max_decoded);
  return out;
}

std::string echo_output(const std::vector<std::string>& args) {
  bool newline = true, escapes = false;
  size_t k = 0;
  for (; k < args.size(); ++k) {
    const auto& a = args[k];
    if (a.size() < 2 || a[0] != '-'
        || a.find_first_not_of("neE", 1) != std::string::npos)
      break;
    for (size_t j = 1; j < a.size(); ++j) {
      if (a[j] == 'n')
        newline = false;
      else if (a[j] == 'e')
        escapes = true;
      else
        escapes = false;
    }
  }
  std::string out;
  bool stop = false;
  for (size_t j = k; j < args.size() && !stop; ++j) {
    if (j > k)
      out.push_back(' ');
    out += escapes ? decode_escapes(args[j], true, stop) : args[j];
    if (out.size() > max_decoded)
      break;
  }
  if (newline && !stop)
    out.push_back('\n');
  if (out.size() > max_decoded)
    out.resize(max_decoded);
  return out;
}

std::optional<std::string> base64_decode(std::string_view text) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  size_t symbols = 0;
  bool padding = false;
  for (char c : text) {
    int v;
    if (c >= 'A' && c <= 'Z')
      v = c - 'A';
    else if (c >= 'a' && c <= 'z')
      v = c - 'a' + 26;
    else if (c >= '0' && c <= '9')
      v = c - '0' + 52;
    else if (c == '+' || c == '-')
      v = 62;
    else if (c == '/' || c == '_')
      v = 63;
    else if (c == '=') {
      padding = true;
      continue;
    } else if (c == ' ' || c == '\n' || c == '\r' || c == '\t')
      continue;
    else
      return std::nullopt;
    if (padding)
      return std::nullopt; // data after padding
    ++symbols;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
      if (out.size() >= max_decoded)
        break;
    }
  }
  if (symbols == 0 || symbols % 4 == 1)
    return std::nullopt;
  return out;
}

} // namespace mibyan::approvals
