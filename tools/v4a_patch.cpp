#include "tools/v4a_patch.hpp"

#include "tools/fuzzy_match.hpp"
#include "base/strings.hpp"

namespace mibyan {

namespace {

// A patch line without its indentation and trailing blanks (CR included).
std::string_view bare(std::string_view s) {
  return strings::trim_right_view(strings::trim_left_view(s, " \t"), " \t\r");
}

std::string join(const std::vector<std::string>& lines) {
  std::string out;
  for (auto& l : lines) {
    out += l;
    out += '\n';
  }
  return out;
}

std::string at_line(size_t n, std::string_view line) {
  std::string shown{line.substr(0, 120)};
  return "line " + std::to_string(n) + " ('" + shown + "')";
}

} // namespace

std::string parse_v4a(std::string_view text, std::vector<v4a_section>& out) {
  std::vector<std::string_view> lines;
  size_t pos = 0;
  while (pos <= text.size()) {
    auto nl = text.find('\n', pos);
    auto end = nl == std::string_view::npos ? text.size() : nl;
    auto line = text.substr(pos, end - pos);
    if (!line.empty() && line.back() == '\r')
      line.remove_suffix(1);
    lines.push_back(line);
    if (nl == std::string_view::npos)
      break;
    pos = nl + 1;
  }
  size_t i = 0;
  while (i < lines.size() && bare(lines[i]).empty())
    ++i;
  if (i == lines.size() || bare(lines[i]) != "*** Begin Patch")
    return "patch must start with '*** Begin Patch'";
  ++i;
  bool ended = false;
  v4a_section* cur = nullptr;
  for (; i < lines.size(); ++i) {
    auto line = lines[i];
    auto t = bare(line);
    if (t == "*** End Patch") {
      ended = true;
      break;
    }
    if (strings::starts_with(t, "*** ")) {
      v4a_section s;
      if (strings::starts_with(t, "*** Update File:")) {
        s.what = v4a_section::kind::update;
        s.path = std::string{bare(t.substr(16))};
      } else if (strings::starts_with(t, "*** Add File:")) {
        s.what = v4a_section::kind::add;
        s.path = std::string{bare(t.substr(13))};
      } else if (strings::starts_with(t, "*** Delete File:")) {
        s.what = v4a_section::kind::remove;
        s.path = std::string{bare(t.substr(16))};
      } else if (strings::starts_with(t, "*** Move File:")) {
        auto rest = t.substr(14);
        auto arrow = rest.find("->");
        if (arrow == std::string_view::npos)
          return "Move File needs 'old -> new' at " + at_line(i + 1, line);
        s.what = v4a_section::kind::update;
        s.path = std::string{bare(rest.substr(0, arrow))};
        s.move_to = std::string{bare(rest.substr(arrow + 2))};
        if (s.move_to.empty())
          return "Move File has no destination at " + at_line(i + 1, line);
      } else if (strings::starts_with(t, "*** Move to:")) {
        if (cur == nullptr || cur->what != v4a_section::kind::update)
          return "'*** Move to:' outside an Update File section at "
                 + at_line(i + 1, line);
        cur->move_to = std::string{bare(t.substr(12))};
        continue;
      } else if (t == "*** End of File") {
        continue;
      } else {
        return "Unknown patch directive at " + at_line(i + 1, line);
      }
      if (s.path.empty())
        return "missing file path at " + at_line(i + 1, line);
      out.push_back(std::move(s));
      cur = &out.back();
      continue;
    }
    if (cur == nullptr) {
      if (t.empty())
        continue;
      return "Expected a '*** Update/Add/Delete/Move File:' line at "
             + at_line(i + 1, line);
    }
    switch (cur->what) {
      case v4a_section::kind::remove:
        if (!t.empty())
          return "Delete File takes no content; unexpected "
                 + at_line(i + 1, line);
        break;
      case v4a_section::kind::add:
        if (strings::starts_with(line, "+")) {
          cur->content.append(line.substr(1));
          cur->content += '\n';
        } else if (!t.empty()) {
          return "Add File lines must start with '+': " + at_line(i + 1, line);
        }
        break;
      case v4a_section::kind::update:
        if (strings::starts_with(line, "@@")) {
          auto hint = bare(line.substr(2));
          if (hint.size() >= 2 && hint.substr(hint.size() - 2) == "@@")
            hint = bare(hint.substr(0, hint.size() - 2));
          cur->hunks.push_back(v4a_hunk{std::string{hint}, {}, {}});
          break;
        }
        if (cur->hunks.empty())
          cur->hunks.emplace_back();
        auto& h = cur->hunks.back();
        if (line.empty()) {
          h.old_lines.emplace_back();
          h.new_lines.emplace_back();
        } else if (line[0] == ' ') {
          h.old_lines.emplace_back(line.substr(1));
          h.new_lines.emplace_back(line.substr(1));
        } else if (line[0] == '-') {
          h.old_lines.emplace_back(line.substr(1));
        } else if (line[0] == '+') {
          h.new_lines.emplace_back(line.substr(1));
        } else {
          return "Hunk lines must start with ' ', '-' or '+': "
                 + at_line(i + 1, line);
        }
        break;
    }
  }
  if (!ended)
    return "patch is missing '*** End Patch' (was the call cut off?)";
  if (out.empty())
    return "patch contains no file sections";
  for (auto& s : out) {
    // Trailing empty context lines are usually stray blank lines before
    // the next directive, not part of the hunk.
    for (auto& h : s.hunks) {
      while (!h.old_lines.empty() && !h.new_lines.empty()
             && h.old_lines.back().empty() && h.new_lines.back().empty()) {
        h.old_lines.pop_back();
        h.new_lines.pop_back();
      }
    }
    if (s.what == v4a_section::kind::update && s.hunks.empty()
        && s.move_to.empty())
      return "Update File: " + s.path + " has no hunks";
  }
  return {};
}

std::string apply_v4a_hunks(std::string_view content,
                            const std::vector<v4a_hunk>& hunks,
                            std::string& out) {
  std::string text{content};
  for (size_t n = 0; n < hunks.size(); ++n) {
    auto& h = hunks[n];
    auto label = "hunk " + std::to_string(n + 1)
                 + (h.hint.empty() ? "" : " (@@ " + h.hint + ")");
    if (h.old_lines == h.new_lines)
      continue;
    size_t from = 0;
    if (!h.hint.empty()) {
      auto at = text.find(h.hint);
      if (at != std::string::npos) {
        auto eol = text.find('\n', at);
        from = eol == std::string::npos ? text.size() : eol + 1;
      }
    }
    auto old_block = join(h.old_lines);
    auto new_block = join(h.new_lines);
    if (old_block.empty()) {
      // Pure insertion: after the hint line, or at the end of the file.
      if (h.hint.empty())
        from = text.size();
      if (from == text.size() && !text.empty() && text.back() != '\n') {
        text += '\n';
        from = text.size();
      }
      text.insert(from, new_block);
      continue;
    }
    auto head = text.substr(0, from);
    auto r = fuzzy_replace(std::string_view{text}.substr(from), old_block,
                           new_block, false);
    if (!r.error.empty() && from > 0) {
      // The hint may name a line after the context; try the whole file.
      head.clear();
      r = fuzzy_replace(text, old_block, new_block, false);
    }
    if (!r.error.empty()) {
      if (r.not_found) {
        auto closest = closest_section(text, old_block);
        return label + ": could not find the context/removed lines in the "
               + "file." + (closest.empty() ? "" : "\n" + closest);
      }
      return label + ": " + r.error;
    }
    text = head + r.content;
  }
  out = std::move(text);
  return {};
}

} // namespace mibyan
