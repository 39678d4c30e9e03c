// File: base/ascii_text.hpp
//
// Small ASCII text helpers for protocol tokens (header values, scheme
// names, form answers). Thread-safe (no state); never fail.
#pragma once

#include <cctype>
#include <string>

namespace mibyan {

/// `s` with ASCII letters lowered (C locale; other bytes unchanged).
inline std::string ascii_lower(std::string s) {
  for (auto& c : s)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

/// `s` without leading and trailing spaces, tabs, CRs and LFs.
inline std::string trim_space(const std::string& s) {
  auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos)
    return {};
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

} // namespace mibyan
