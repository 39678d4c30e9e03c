#include "base/strings.hpp"

namespace mibyan::strings {

std::string lower(std::string_view s) {
  std::string out{s};
  for (auto& c : out)
    if (c >= 'A' && c <= 'Z')
      c = static_cast<char>(c - 'A' + 'a');
  return out;
}

std::string upper(std::string_view s) {
  std::string out{s};
  for (auto& c : out)
    if (c >= 'a' && c <= 'z')
      c = static_cast<char>(c - 'a' + 'A');
  return out;
}

std::string_view trim_left_view(std::string_view s, std::string_view chars) {
  auto b = s.find_first_not_of(chars);
  return b == std::string_view::npos ? std::string_view{} : s.substr(b);
}

std::string_view trim_right_view(std::string_view s, std::string_view chars) {
  auto e = s.find_last_not_of(chars);
  return e == std::string_view::npos ? std::string_view{} : s.substr(0, e + 1);
}

std::string_view trim_view(std::string_view s, std::string_view chars) {
  return trim_right_view(trim_left_view(s, chars), chars);
}

std::string trim(std::string_view s, std::string_view chars) {
  return std::string{trim_view(s, chars)};
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size()
         && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size())
    return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z')
      x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z')
      y = static_cast<char>(y - 'A' + 'a');
    if (x != y)
      return false;
  }
  return true;
}

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    auto at = s.find(sep, start);
    if (at == std::string_view::npos) {
      out.emplace_back(s.substr(start));
      return out;
    }
    out.emplace_back(s.substr(start, at - start));
    start = at + 1;
  }
}

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0)
      out.append(sep);
    out.append(parts[i]);
  }
  return out;
}

} // namespace mibyan::strings
