#include "tools/fuzzy_match.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "base/strings.hpp"

namespace mibyan {

namespace {

// -- text helpers -------------------------------------------------------------

// `s` without the white space (C's isspace) this matcher ignores at the
// ends of a line.
std::string_view bare(std::string_view s) {
  return strings::trim_view(s, strings::ascii_space);
}

bool is_blank(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
}

std::string collapse(std::string_view s) {
  s = bare(s);
  std::string out;
  out.reserve(s.size());
  bool gap = false;
  for (char c : s) {
    if (is_blank(c)) {
      gap = true;
      continue;
    }
    if (gap)
      out += ' ';
    gap = false;
    out += c;
  }
  return out;
}

std::string_view indent_of(std::string_view line) {
  auto text = strings::trim_left_view(line, " \t\r\f\v");
  return line.substr(0, line.size() - text.size());
}

std::vector<std::string_view> split(std::string_view text) {
  std::vector<std::string_view> out;
  size_t pos = 0;
  for (;;) {
    auto nl = text.find('\n', pos);
    if (nl == std::string_view::npos) {
      out.push_back(text.substr(pos));
      return out;
    }
    out.push_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
}

std::string replace_all_of(std::string_view s, std::string_view from,
                           std::string_view to) {
  std::string out;
  size_t pos = 0;
  for (;;) {
    auto hit = s.find(from, pos);
    if (hit == std::string_view::npos)
      break;
    out.append(s.substr(pos, hit - pos));
    out.append(to);
    pos = hit + from.size();
  }
  out.append(s.substr(pos));
  return out;
}

size_t count_of(std::string_view s, std::string_view what) {
  size_t n = 0;
  for (size_t pos = s.find(what); pos != std::string_view::npos;
       pos = s.find(what, pos + what.size()))
    ++n;
  return n;
}

// Dice coefficient over character bigrams: 1 for equal strings.
double similarity(std::string_view a, std::string_view b) {
  if (a == b)
    return 1.0;
  if (a.size() < 2 || b.size() < 2)
    return 0.0;
  auto grams = [](std::string_view s) {
    std::vector<uint16_t> g;
    g.reserve(s.size());
    for (size_t i = 0; i + 1 < s.size(); ++i)
      g.push_back(static_cast<uint16_t>(
        (static_cast<unsigned char>(s[i]) << 8)
        | static_cast<unsigned char>(s[i + 1])));
    std::sort(g.begin(), g.end());
    return g;
  };
  auto ga = grams(a);
  auto gb = grams(b);
  size_t common = 0;
  size_t i = 0;
  size_t j = 0;
  while (i < ga.size() && j < gb.size()) {
    if (ga[i] == gb[j]) {
      ++common;
      ++i;
      ++j;
    } else if (ga[i] < gb[j]) {
      ++i;
    } else {
      ++j;
    }
  }
  return 2.0 * static_cast<double>(common)
         / static_cast<double>(ga.size() + gb.size());
}

// -- matching machinery -------------------------------------------------------

// One replaced region of the content and what goes there.
struct hit {
  size_t begin;
  size_t end;
  std::string replacement;
};

struct line_ref {
  size_t begin;
  size_t end; // excludes the '\n'
};

std::vector<line_ref> index_lines(std::string_view text) {
  std::vector<line_ref> out;
  size_t pos = 0;
  for (;;) {
    auto nl = text.find('\n', pos);
    if (nl == std::string_view::npos) {
      out.push_back({pos, text.size()});
      return out;
    }
    out.push_back({pos, nl});
    pos = nl + 1;
  }
}

// Shifts every line of `text` that starts with `from` to start with `to`,
// but only when all non-blank lines start with `from`.
std::string reindent(std::string_view text, std::string_view from,
                     std::string_view to) {
  if (from == to)
    return std::string{text};
  auto lines = split(text);
  for (auto& l : lines)
    if (!bare(l).empty() && l.substr(0, from.size()) != from)
      return std::string{text};
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0)
      out += '\n';
    if (!bare(lines[i]).empty()) {
      out.append(to);
      out.append(lines[i].substr(from.size()));
    } else {
      out.append(lines[i]);
    }
  }
  return out;
}

struct match_input {
  std::string_view content;
  std::vector<line_ref> lines;
  std::string_view old_text;
  std::string_view new_text;
};

std::string_view line_at(const match_input& in, size_t i) {
  return in.content.substr(in.lines[i].begin,
                           in.lines[i].end - in.lines[i].begin);
}

// old_text split into lines, without the final newline; records whether it
// had one (then the match also swallows the newline of its last line).
struct old_lines {
  std::vector<std::string_view> lines;
  bool trailing_newline = false;
};

old_lines split_old(std::string_view old_text) {
  old_lines out;
  if (!old_text.empty() && old_text.back() == '\n') {
    out.trailing_newline = true;
    old_text.remove_suffix(1);
  }
  out.lines = split(old_text);
  return out;
}

hit make_line_hit(const match_input& in, const old_lines& old, size_t first,
                  size_t last) {
  hit h;
  h.begin = in.lines[first].begin;
  h.end = in.lines[last].end;
  if (old.trailing_newline && h.end < in.content.size())
    ++h.end;
  std::string_view old_indent;
  for (auto& l : old.lines)
    if (!bare(l).empty()) {
      old_indent = indent_of(l);
      break;
    }
  std::string_view new_indent;
  for (size_t i = first; i <= last; ++i)
    if (!bare(line_at(in, i)).empty()) {
      new_indent = indent_of(line_at(in, i));
      break;
    }
  h.replacement = reindent(in.new_text, old_indent, new_indent);
  return h;
}

// Whole-line matching after `norm`; non-overlapping, in order.
template <class Norm>
std::vector<hit> match_lines(const match_input& in, Norm norm) {
  std::vector<hit> out;
  auto old = split_old(in.old_text);
  const size_t n = old.lines.size();
  std::vector<std::string> want;
  bool all_blank = true;
  for (auto& l : old.lines) {
    want.push_back(norm(l));
    all_blank = all_blank && want.back().empty();
  }
  if (all_blank || n > in.lines.size())
    return out;
  for (size_t i = 0; i + n <= in.lines.size();) {
    size_t k = 0;
    while (k < n && norm(line_at(in, i + k)) == want[k])
      ++k;
    if (k == n) {
      out.push_back(make_line_hit(in, old, i, i + n - 1));
      i += n;
    } else {
      ++i;
    }
  }
  return out;
}

std::vector<hit> match_exact(const match_input& in) {
  std::vector<hit> out;
  if (in.old_text.empty())
    return out;
  for (size_t pos = in.content.find(in.old_text);
       pos != std::string_view::npos;
       pos = in.content.find(in.old_text, pos + in.old_text.size()))
    out.push_back({pos, pos + in.old_text.size(), std::string{in.new_text}});
  return out;
}

std::vector<hit> match_line_trimmed(const match_input& in) {
  return match_lines(in, [](std::string_view l) {
    return std::string{bare(l)};
  });
}

std::vector<hit> match_whitespace_normalized(const match_input& in) {
  return match_lines(in, collapse);
}

// Leading blanks ignored; blank lines on either side skipped.
std::vector<hit> match_indentation_flexible(const match_input& in) {
  std::vector<hit> out;
  auto old = split_old(in.old_text);
  std::vector<std::string_view> want;
  for (auto& l : old.lines)
    if (!bare(l).empty())
      want.push_back(bare(l));
  std::vector<size_t> idx; // non-blank content lines
  for (size_t i = 0; i < in.lines.size(); ++i)
    if (!bare(line_at(in, i)).empty())
      idx.push_back(i);
  const size_t n = want.size();
  if (n == 0 || n > idx.size())
    return out;
  for (size_t j = 0; j + n <= idx.size();) {
    size_t k = 0;
    while (k < n && bare(line_at(in, idx[j + k])) == want[k])
      ++k;
    if (k == n) {
      out.push_back(make_line_hit(in, old, idx[j], idx[j + n - 1]));
      j += n;
    } else {
      ++j;
    }
  }
  return out;
}

// Per-line similarity between old lines and a content window.
template <class Accept>
std::vector<hit> match_similar(const match_input& in, size_t min_lines,
                               Accept accept) {
  std::vector<hit> out;
  auto old = split_old(in.old_text);
  const size_t n = old.lines.size();
  if (n < min_lines || n > in.lines.size())
    return out;
  // Bound the work on huge inputs: these strategies are a last resort.
  if (static_cast<double>(in.lines.size()) * static_cast<double>(n) > 4e6)
    return out;
  std::vector<std::string_view> want;
  for (auto& l : old.lines)
    want.push_back(bare(l));
  for (size_t i = 0; i + n <= in.lines.size(); ++i) {
    if (accept(in, want, i))
      out.push_back(make_line_hit(in, old, i, i + n - 1));
  }
  // Overlapping windows are one place, not several.
  std::vector<hit> merged;
  for (auto& h : out)
    if (merged.empty() || h.begin >= merged.back().end)
      merged.push_back(std::move(h));
  return merged;
}

std::vector<hit> match_block_anchor(const match_input& in) {
  return match_similar(
    in, 3, [](const match_input& in, const std::vector<std::string_view>& w,
              size_t i) {
      const size_t n = w.size();
      if (w.front().empty() || w.back().empty()
          || bare(line_at(in, i)) != w.front()
          || bare(line_at(in, i + n - 1)) != w.back())
        return false;
      double sum = 0;
      for (size_t k = 1; k + 1 < n; ++k)
        sum += similarity(bare(line_at(in, i + k)), w[k]);
      return sum / static_cast<double>(n - 2) >= 0.5;
    });
}

std::vector<hit> match_context_aware(const match_input& in) {
  return match_similar(
    in, 2, [](const match_input& in, const std::vector<std::string_view>& w,
              size_t i) {
      double sum = 0;
      for (size_t k = 0; k < w.size(); ++k) {
        auto s = similarity(bare(line_at(in, i + k)), w[k]);
        if (s < 0.5)
          return false;
        sum += s;
      }
      return sum / static_cast<double>(w.size()) >= 0.8;
    });
}

// -- transformed-text strategies ----------------------------------------------

std::string unescape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) {
      char c = s[i + 1];
      char r = c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r'
               : (c == '"' || c == '\'' || c == '\\') ? c : 0;
      if (r != 0) {
        out += r;
        ++i;
        continue;
      }
    }
    out += s[i];
  }
  return out;
}

// Text with a map back to the original: pos[i] is the original offset of
// text[i]; pos[text.size()] is the original size.
struct mapped_text {
  std::string text;
  std::vector<size_t> pos;
};

// Folds typographic characters to ASCII.
mapped_text unicode_fold(std::string_view s) {
  struct rule {
    std::string_view from;
    std::string_view to;
  };
  static const rule rules[] = {
    {"\u2018", "'"},  {"\u2019", "'"},  {"\u201a", "'"},   {"\u201b", "'"},
    {"\u201c", "\""}, {"\u201d", "\""}, {"\u201e", "\""},  {"\u201f", "\""},
    {"\u2013", "-"},  {"\u2014", "-"},  {"\u2015", "-"},   {"\u2212", "-"},
    {"\u00a0", " "},  {"\u2002", " "},  {"\u2003", " "},   {"\u2009", " "},
    {"\u202f", " "},  {"\u2026", "..."}, {"\u200b", ""},   {"\ufeff", ""},
  };
  mapped_text out;
  out.text.reserve(s.size());
  out.pos.reserve(s.size() + 1);
  size_t i = 0;
  while (i < s.size()) {
    bool done = false;
    if (static_cast<unsigned char>(s[i]) >= 0x80) {
      for (auto& r : rules) {
        if (s.substr(i, r.from.size()) == r.from) {
          for (char c : r.to) {
            out.text += c;
            out.pos.push_back(i);
          }
          i += r.from.size();
          done = true;
          break;
        }
      }
    }
    if (!done) {
      out.text += s[i];
      out.pos.push_back(i);
      ++i;
    }
  }
  out.pos.push_back(s.size());
  return out;
}

std::vector<hit> match_unicode_normalized(const match_input& in) {
  auto folded = unicode_fold(in.content);
  auto old = unicode_fold(in.old_text).text;
  if (old.empty() || (folded.text == in.content && old == in.old_text))
    return {};
  match_input sub{folded.text, index_lines(folded.text), old, in.new_text};
  auto found = match_exact(sub);
  if (found.empty())
    found = match_line_trimmed(sub);
  for (auto& h : found) {
    h.begin = folded.pos[h.begin];
    h.end = folded.pos[h.end];
  }
  return found;
}

// -- the driver ---------------------------------------------------------------

bool pure_crlf(std::string_view s) {
  size_t lf = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\n')
      continue;
    ++lf;
    if (i == 0 || s[i - 1] != '\r')
      return false;
  }
  return lf > 0;
}

std::string apply(std::string_view content, const std::vector<hit>& hits) {
  std::string out;
  out.reserve(content.size());
  size_t pos = 0;
  for (auto& h : hits) {
    out.append(content.substr(pos, h.begin - pos));
    out.append(h.replacement);
    pos = h.end;
  }
  out.append(content.substr(pos));
  return out;
}

std::string too_many(size_t n) {
  return "Found " + std::to_string(n)
         + " matches for old_string. Provide more context to make it "
           "unique, or use replace_all=True.";
}

const char* escape_drift_message =
  "Escape drift: new_string contains \\' or \\\" (a backslash before a "
  "quote) that neither old_string nor the file has; this would write "
  "literal backslashes into the file. Send old_string and new_string "
  "exactly as the file should read, without escaping quotes.";

bool escape_drift(std::string_view content, std::string_view old_text,
                  std::string_view new_text) {
  for (std::string_view seq : {std::string_view{"\\'"},
                               std::string_view{"\\\""}}) {
    char quote = seq[1];
    if (count_of(new_text, seq) > count_of(old_text, seq)
        && content.find(seq) == std::string_view::npos
        && old_text.find(quote) != std::string_view::npos)
      return true;
  }
  return false;
}

fuzzy_outcome replace_lf(std::string_view content, std::string_view old_text,
                         std::string_view new_text, bool replace_all) {
  fuzzy_outcome out;
  if (escape_drift(content, old_text, new_text)) {
    out.error = escape_drift_message;
    return out;
  }
  match_input in{content, index_lines(content), old_text, new_text};
  using strategy_fn = std::vector<hit> (*)(const match_input&);
  struct strategy {
    const char* name;
    strategy_fn fn;
    bool unique_only;
  };
  static const strategy strategies[] = {
    {"exact", match_exact, false},
    {"line_trimmed", match_line_trimmed, false},
    {"whitespace_normalized", match_whitespace_normalized, false},
    {"indentation_flexible", match_indentation_flexible, false},
    {"escape_normalized", nullptr, false},
    {"trimmed_boundary", nullptr, false},
    {"unicode_normalized", match_unicode_normalized, false},
    {"block_anchor", match_block_anchor, true},
    {"context_aware", match_context_aware, true},
  };
  for (auto& s : strategies) {
    std::vector<hit> hits;
    std::string name = s.name;
    std::string owned_old;
    std::string owned_new;
    if (s.fn != nullptr) {
      hits = s.fn(in);
    } else if (name == "escape_normalized") {
      owned_old = unescape(old_text);
      if (owned_old == old_text || owned_old.empty())
        continue;
      if (new_text.find("\\\"") != std::string_view::npos
          || new_text.find("\\'") != std::string_view::npos) {
        // Only matters if the unescaped form would match at all.
        match_input probe{content, in.lines, owned_old, new_text};
        if (!match_exact(probe).empty()
            || !match_line_trimmed(probe).empty()) {
          out.error = escape_drift_message;
          return out;
        }
        continue;
      }
      owned_new = unescape(new_text);
      match_input sub{content, in.lines, owned_old, owned_new};
      hits = match_exact(sub);
      if (hits.empty())
        hits = match_line_trimmed(sub);
    } else { // trimmed_boundary
      auto t = bare(old_text);
      if (t.empty() || t.size() == old_text.size())
        continue;
      auto lead = old_text.substr(0, old_text.find(t));
      auto trail = old_text.substr(old_text.find(t) + t.size());
      auto nt = new_text;
      if (nt.substr(0, lead.size()) == lead)
        nt.remove_prefix(lead.size());
      if (nt.size() >= trail.size()
          && nt.substr(nt.size() - trail.size()) == trail)
        nt.remove_suffix(trail.size());
      owned_new = std::string{nt};
      match_input sub{content, in.lines, t, owned_new};
      hits = match_exact(sub);
    }
    if (hits.empty())
      continue;
    if (hits.size() > 1 && (!replace_all || s.unique_only)) {
      out.error = too_many(hits.size());
      return out;
    }
    out.content = apply(content, hits);
    out.replacements = hits.size();
    out.strategy = name;
    return out;
  }
  out.not_found = true;
  out.error = "Could not find match for old_string";
  return out;
}

} // namespace

fuzzy_outcome fuzzy_replace(std::string_view content,
                            std::string_view old_text,
                            std::string_view new_text, bool replace_all) {
  if (!pure_crlf(content))
    return replace_lf(content, old_text, new_text, replace_all);
  auto lf = replace_all_of(content, "\r\n", "\n");
  auto old_lf = replace_all_of(old_text, "\r\n", "\n");
  auto new_lf = replace_all_of(new_text, "\r\n", "\n");
  auto out = replace_lf(lf, old_lf, new_lf, replace_all);
  if (out.error.empty())
    out.content = replace_all_of(out.content, "\n", "\r\n");
  return out;
}

std::string closest_section(std::string_view content,
                            std::string_view old_text, size_t max_lines) {
  auto lines = split(content);
  auto old = split(bare(old_text));
  if (old.empty() || lines.empty())
    return {};
  const size_t n = std::min(old.size(), lines.size());
  std::vector<std::string_view> want;
  for (auto& l : old)
    want.push_back(bare(l));
  double best = -1;
  size_t best_i = 0;
  double budget = 4e6; // bigram comparisons of whole lines, roughly
  for (size_t i = 0; i + n <= lines.size() && budget > 0; ++i) {
    double sum = 0;
    for (size_t k = 0; k < n; ++k) {
      sum += similarity(bare(lines[i + k]), want[k]);
      budget -= 1;
    }
    double score = sum / static_cast<double>(old.size());
    if (score > best) {
      best = score;
      best_i = i;
    }
  }
  if (best < 0.3)
    return {};
  auto shown = std::min(n, max_lines);
  std::string out = "Closest section (lines " + std::to_string(best_i + 1)
                    + "-" + std::to_string(best_i + n) + ", "
                    + std::to_string(static_cast<int>(best * 100 + 0.5))
                    + "% similar):\n";
  for (size_t k = 0; k < shown; ++k) {
    auto l = lines[best_i + k];
    if (!l.empty() && l.back() == '\r')
      l.remove_suffix(1);
    out += std::to_string(best_i + k + 1) + "|";
    if (l.size() > 200) {
      out.append(l.substr(0, 200));
      out += "...";
    } else {
      out.append(l);
    }
    out += '\n';
  }
  if (shown < n)
    out += "... (" + std::to_string(n - shown) + " more lines)\n";
  return out;
}

} // namespace mibyan
