#include "tools/unified_diff.hpp"

#include <algorithm>
#include <vector>

namespace mibyan {

namespace {

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t pos = 0;
  while (pos < text.size()) {
    auto nl = text.find('\n', pos);
    auto end = nl == std::string_view::npos ? text.size() : nl + 1;
    lines.push_back(text.substr(pos, end - pos));
    pos = end;
  }
  return lines;
}

// One line of the edit script: ' ' (both), '-' (only a), '+' (only b).
struct edit {
  char op;
  int a; // index into a, valid for ' ' and '-'
  int b; // index into b, valid for ' ' and '+'
};

// Myers' O((N+M)D) diff of a[a0,a1) and b[b0,b1). Appends the script and
// returns true, or returns false when more than max_d edits are needed.
bool myers(const std::vector<std::string_view>& a, int a0, int a1,
           const std::vector<std::string_view>& b, int b0, int b1, int max_d,
           std::vector<edit>& out) {
  const int n = a1 - a0;
  const int m = b1 - b0;
  const int max = n + m;
  const int off = max + 1;
  std::vector<int> v(2 * static_cast<size_t>(max) + 3, 0);
  std::vector<std::vector<int>> trace; // trace[d][k + d + 1] = v[k] before d
  int found = -1;
  for (int d = 0; d <= std::min(max, max_d) && found < 0; ++d) {
    trace.emplace_back(v.begin() + (off - d - 1), v.begin() + (off + d + 2));
    for (int k = -d; k <= d; k += 2) {
      int x = (k == -d || (k != d && v[off + k - 1] < v[off + k + 1]))
                ? v[off + k + 1]
                : v[off + k - 1] + 1;
      int y = x - k;
      while (x < n && y < m && a[a0 + x] == b[b0 + y]) {
        ++x;
        ++y;
      }
      v[off + k] = x;
      if (x >= n && y >= m) {
        found = d;
        break;
      }
    }
  }
  if (found < 0)
    return false;
  std::vector<edit> rev;
  int x = n;
  int y = m;
  for (int d = found; d >= 0; --d) {
    auto& tv = trace[static_cast<size_t>(d)];
    auto at = [&](int k) { return tv[static_cast<size_t>(k + d + 1)]; };
    int k = x - y;
    int prev_k = (k == -d || (k != d && at(k - 1) < at(k + 1))) ? k + 1
                                                               : k - 1;
    int prev_x = d == 0 ? 0 : at(prev_k);
    int prev_y = d == 0 ? 0 : prev_x - prev_k;
    while (x > prev_x && y > prev_y) {
      rev.push_back({' ', a0 + x - 1, b0 + y - 1});
      --x;
      --y;
    }
    if (d > 0) {
      if (x == prev_x)
        rev.push_back({'+', -1, b0 + y - 1});
      else
        rev.push_back({'-', a0 + x - 1, -1});
      x = prev_x;
      y = prev_y;
    }
  }
  out.insert(out.end(), rev.rbegin(), rev.rend());
  return true;
}

void append_line(std::string& out, char op, std::string_view line) {
  out += op;
  out.append(line.data(), line.size());
  if (line.empty() || line.back() != '\n')
    out += "\n\\ No newline at end of file\n";
}

std::string range(int start, int count) {
  // diff -u names the line before an empty range, and omits a count of 1.
  if (count == 0)
    return std::to_string(start) + ",0";
  if (count == 1)
    return std::to_string(start + 1);
  return std::to_string(start + 1) + "," + std::to_string(count);
}

} // namespace

std::string unified_diff(std::string_view before, std::string_view after,
                         const std::string& old_label,
                         const std::string& new_label, int context,
                         int max_edits) {
  if (before == after)
    return {};
  auto a = split_lines(before);
  auto b = split_lines(after);
  const int n = static_cast<int>(a.size());
  const int m = static_cast<int>(b.size());
  int prefix = 0;
  while (prefix < n && prefix < m && a[prefix] == b[prefix])
    ++prefix;
  int suffix = 0;
  while (suffix < n - prefix && suffix < m - prefix
         && a[n - 1 - suffix] == b[m - 1 - suffix])
    ++suffix;
  std::vector<edit> script;
  for (int i = 0; i < prefix; ++i)
    script.push_back({' ', i, i});
  if (!myers(a, prefix, n - suffix, b, prefix, m - suffix, max_edits,
             script)) {
    for (int i = prefix; i < n - suffix; ++i)
      script.push_back({'-', i, -1});
    for (int j = prefix; j < m - suffix; ++j)
      script.push_back({'+', -1, j});
  }
  for (int i = 0; i < suffix; ++i)
    script.push_back({' ', n - suffix + i, m - suffix + i});

  std::string out = "--- " + old_label + "\n+++ " + new_label + "\n";
  const int total = static_cast<int>(script.size());
  int i = 0;
  int counted = 0; // script[0, counted) is reflected in a_pos and b_pos
  int a_pos = 0;
  int b_pos = 0;
  while (i < total) {
    while (i < total && script[i].op == ' ')
      ++i;
    if (i >= total)
      break;
    // A hunk starts `context` lines before the change and grows while the
    // next change is within 2 * context unchanged lines.
    int start = std::max(0, i - context);
    int end = i;
    for (;;) {
      while (end < total && script[end].op != ' ')
        ++end;
      int gap = end;
      while (gap < total && script[gap].op == ' ' && gap - end < 2 * context)
        ++gap;
      if (gap < total && script[gap].op != ' ' && gap - end <= 2 * context) {
        end = gap;
        continue;
      }
      end = std::min(total, end + context);
      break;
    }
    // Line numbers: the a/b position of the hunk's first line.
    for (; counted < start; ++counted) {
      if (script[counted].op != '+')
        ++a_pos;
      if (script[counted].op != '-')
        ++b_pos;
    }
    int a_start = a_pos;
    int b_start = b_pos;
    int a_count = 0;
    int b_count = 0;
    for (int j = start; j < end; ++j) {
      if (script[j].op != '+')
        ++a_count;
      if (script[j].op != '-')
        ++b_count;
    }
    out += "@@ -" + range(a_start, a_count) + " +" + range(b_start, b_count)
           + " @@\n";
    for (int j = start; j < end; ++j) {
      auto& e = script[j];
      append_line(out, e.op, e.op == '+' ? b[e.b] : a[e.a]);
    }
    i = end;
  }
  return out;
}

} // namespace mibyan
