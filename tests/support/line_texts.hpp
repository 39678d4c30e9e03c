// File: tests/support/line_texts.hpp
//
// Texts of numbered and varied lines for the read_file suites
// (read_file_test, read_file_paging_test) and the line index suite
// (line_index_test), and the line split read_file counts by. Header-only,
// pure (no I/O, no Boost.Test), thread-safe.
#pragma once

#include <string>
#include <vector>

namespace mibyan::test {

// "N|prefixN" for N in from..to, one per line, as read_file shows them.

inline std::string numbered(int from, int to, const std::string& prefix = "line") {
  std::string out;
  for (int i = from; i <= to; ++i) {
    if (!out.empty())
      out += '\n';
    out += std::to_string(i) + "|" + prefix + std::to_string(i);
  }
  return out;
}

// "prefixN\n" for N in 1..n.
inline std::string lines_file(int n, const std::string& prefix = "line") {
  std::string out;
  for (int i = 1; i <= n; ++i)
    out += prefix + std::to_string(i) + "\n";
  return out;
}

// Splits a text into lines the way read_file counts them: every '\n' ends
// a line, bytes after the last '\n' form one more line.
inline std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < text.size()) {
    auto nl = text.find('\n', pos);
    if (nl == std::string::npos) {
      out.push_back(text.substr(pos));
      break;
    }
    out.push_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return out;
}

// A text of `n` lines of varied lengths: empty lines, short and medium
// ones, every 997th line 2,500 characters long, and one 1.5 MB line at
// `huge_at` (0: none).
inline std::string varied_text(int n, const std::string& eol = "\n",
                        int huge_at = 0) {
  std::string out;
  for (int i = 1; i <= n; ++i) {
    if (i == huge_at)
      out += std::string(1500000, 'h');
    else if (i % 997 == 0)
      out += "L" + std::to_string(i) + std::string(2500, 'w');
    else if (i % 13 != 0)
      out += "row " + std::to_string(i) + std::string(i % 71, '.');
    out += eol;
  }
  return out;
}

} // namespace mibyan::test
