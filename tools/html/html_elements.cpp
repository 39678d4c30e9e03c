// HTML to text, part: the converter's scanning of the markup (tags,
// attributes, raw-text elements) and what each element does to the output
// (blocks, lists, tables, links, images, chrome left out). The class is
// declared in tools/html/html_converter.hpp.
#include "tools/html/html_converter.hpp"

#include <algorithm>
#include <cstring>
#include <unordered_set>

namespace mibyan::html_detail {

namespace {

bool in_set(const std::unordered_set<std::string_view>& set,
            std::string_view name) {
  return set.find(name) != set.end();
}

// Elements whose content is raw text up to the matching end tag (the
// content is dropped, except for <title>).
bool raw_text_element(std::string_view name) {
  static const std::unordered_set<std::string_view> names = {
    "script", "style", "noscript", "template", "svg",     "math",
    "iframe", "textarea", "title",  "xmp",      "noembed", "noframes",
    "object", "canvas",
  };
  return in_set(names, name);
}

// Elements that break the flow of inline text.
bool block_element(std::string_view name) {
  static const std::unordered_set<std::string_view> names = {
    "address", "article", "body",    "caption", "center",   "dd",
    "details", "dialog",  "div",     "dl",      "dt",       "fieldset",
    "figcaption", "figure", "html",  "legend",  "main",     "p",
    "section", "summary", "table",   "tbody",   "tfoot",    "thead",
    "tr",      "ul",      "ol",      "li",      "blockquote", "pre",
    "h1",      "h2",      "h3",      "h4",      "h5",       "h6",
    "hr",      "menu",    "header",  "footer",  "nav",      "aside",
    "form",    "hgroup",  "search",
  };
  return in_set(names, name);
}

bool table_element(std::string_view name) {
  return name == "table" || name == "tr" || name == "td" || name == "th"
         || name == "tbody" || name == "thead" || name == "tfoot";
}

// Head-only elements; any other start tag implicitly ends <head>.
bool head_element(std::string_view name) {
  static const std::unordered_set<std::string_view> names = {
    "title", "meta", "link", "style", "script", "base", "noscript",
    "template", "head",
  };
  return in_set(names, name);
}

int heading_level(std::string_view name) {
  if (name.size() == 2 && name[0] == 'h' && name[1] >= '1' && name[1] <= '6')
    return name[1] - '0';
  return 0;
}

} // namespace

void converter::markup() {
  auto rest = in_.substr(pos_);
  if (rest.size() < 2) {
    text(rest);
    pos_ = in_.size();
    return;
  }
  char c = rest[1];
  if (c == '!') {
    if (rest.compare(0, 4, "<!--") == 0) {
      auto end = in_.find("-->", pos_ + 4);
      pos_ = end == std::string_view::npos ? in_.size() : end + 3;
    } else if (rest.compare(0, 9, "<![CDATA[") == 0) {
      auto end = in_.find("]]>", pos_ + 9);
      auto stop = end == std::string_view::npos ? in_.size() : end;
      raw_text(in_.substr(pos_ + 9, stop - pos_ - 9));
      pos_ = end == std::string_view::npos ? in_.size() : end + 3;
    } else {
      skip_past('>');
    }
    return;
  }
  if (c == '?') {
    skip_past('>');
    return;
  }
  if (c == '/') {
    if (rest.size() > 2 && is_alpha(rest[2])) {
      pos_ += 2;
      tag t;
      t.end = true;
      t.name = read_name();
      skip_past('>');
      handle(t);
    } else {
      skip_past('>');
    }
    return;
  }
  if (!is_alpha(c)) {
    text("<");
    ++pos_;
    return;
  }
  ++pos_;
  tag t;
  t.name = read_name();
  read_attributes(t);
  handle(t);
  // Only foreign elements (svg, math) can be self-closing.
  bool closed = t.self_closing && (t.name == "svg" || t.name == "math");
  if (!t.end && !closed && raw_text_element(t.name))
    skip_raw_text(t.name);
}

std::string converter::read_name() {
  std::string name;
  while (pos_ < in_.size()) {
    char c = in_[pos_];
    if (is_space(c) || c == '/' || c == '>')
      break;
    if (name.size() < 32)
      name += to_lower(c);
    ++pos_;
  }
  return name;
}

void converter::read_attributes(tag& t) {
  auto n = in_.size();
  while (pos_ < n) {
    char c = in_[pos_];
    if (c == '>') {
      ++pos_;
      return;
    }
    if (is_space(c)) {
      ++pos_;
      continue;
    }
    if (c == '/') {
      ++pos_;
      if (pos_ < n && in_[pos_] == '>') {
        t.self_closing = true;
        ++pos_;
        return;
      }
      continue;
    }
    auto name_begin = pos_;
    ++pos_;  // an attribute name has at least one character, even '='
    while (pos_ < n && !is_space(in_[pos_]) && in_[pos_] != '/'
           && in_[pos_] != '>' && in_[pos_] != '=')
      ++pos_;
    auto name = in_.substr(name_begin, pos_ - name_begin);
    while (pos_ < n && is_space(in_[pos_]))
      ++pos_;
    std::string_view value;
    if (pos_ < n && in_[pos_] == '=') {
      ++pos_;
      while (pos_ < n && is_space(in_[pos_]))
        ++pos_;
      if (pos_ < n && (in_[pos_] == '"' || in_[pos_] == '\'')) {
        char q = in_[pos_];
        auto last = q == '"' ? last_dquote_ : last_squote_;
        auto close = (last == std::string_view::npos || last <= pos_)
                       ? std::string_view::npos
                       : in_.find(q, pos_ + 1);
        if (close == std::string_view::npos) {
          // Unterminated quote: end the tag at the next '>' instead of
          // swallowing the rest of the document.
          value = {};
          skip_past('>');
          assign(t, name, value);
          return;
        }
        value = in_.substr(pos_ + 1, close - pos_ - 1);
        pos_ = close + 1;
      } else {
        auto begin = pos_;
        while (pos_ < n && !is_space(in_[pos_]) && in_[pos_] != '>')
          ++pos_;
        value = in_.substr(begin, pos_ - begin);
      }
    }
    assign(t, name, value);
  }
}

void converter::assign(tag& t, std::string_view name, std::string_view value) {
  if (strings::iequals(name, "href"))
    t.href = value;
  else if (strings::iequals(name, "src"))
    t.src = value;
  else if (strings::iequals(name, "alt"))
    t.alt = value;
  else if (strings::iequals(name, "start"))
    t.start = value;
}

void converter::skip_raw_text(const std::string& name) {
  auto n = in_.size();
  size_t i = pos_;
  size_t content_end = n;
  size_t resume = n;
  while (i < n) {
    auto lt = in_.find("</", i);
    if (lt == std::string_view::npos)
      break;
    auto after = lt + 2;
    if (after + name.size() <= n
        && strings::iequals(in_.substr(after, name.size()), name)
        && (after + name.size() == n
            || !is_alnum(in_[after + name.size()]))) {
      content_end = lt;
      auto gt = in_.find('>', after + name.size());
      resume = gt == std::string_view::npos ? n : gt + 1;
      break;
    }
    i = lt + 2;
  }
  if (name == "title" && !have_title_) {
    have_title_ = true;
    title_ = collapse_spaces(decode(in_.substr(pos_, content_end - pos_),
                                    true, false));
  }
  pos_ = resume;
}

bool converter::chrome_element(const std::string& name) const {
  if (name == "nav" || name == "aside" || name == "form"
      || name == "button" || name == "select")
    return true;
  if (name == "header" || name == "footer")
    return article_depth_ == 0;
  return false;
}

void converter::handle(const tag& t) {
  const auto& name = t.name;
  if (name.empty())
    return;
  if (name == "base" && !t.end && !t.href.empty()) {
    auto href = decode(t.href, false, true);
    if (auto h = parse_base(resolve_with(base_.get(), href)))
      base_ = std::move(h);
    return;
  }
  if (!skip_name_.empty()) {
    if (name == skip_name_) {
      if (!t.end && !t.self_closing)
        ++skip_nesting_;
      else if (t.end && --skip_nesting_ == 0)
        skip_name_.clear();
    }
    return;
  }
  if (in_head_) {
    if (t.end && name == "head") {
      in_head_ = false;
      return;
    }
    if (t.end || head_element(name))
      return;
    in_head_ = false;  // body content without </head><body>
  }
  if (!t.end && name == "head") {
    in_head_ = true;
    return;
  }
  if (name == "article" || name == "main") {
    if (!t.end)
      ++article_depth_;
    else if (article_depth_ > 0)
      --article_depth_;
  }
  if (!t.end && !t.self_closing && drop_chrome_ && chrome_element(name)) {
    flush();
    dropped_chrome_ = true;
    skip_name_ = name;
    skip_nesting_ = 1;
    return;
  }
  if (pre_depth_ > 0) {
    handle_in_pre(t);
    return;
  }
  if (cell_depth_ > 0 && block_element(name) && !table_element(name)) {
    // Blocks inside a cell stay on the row's line.
    soft_break();
    return;
  }
  if (auto level = heading_level(name)) {
    flush();
    if (!t.end) {
      prefix_.assign(static_cast<size_t>(level), '#');
      prefix_ += ' ';
    } else {
      prefix_.clear();
    }
    return;
  }
  if (name == "br") {
    if (cell_depth_ > 0) {
      soft_break();
    } else {
      finalize_link();
      rtrim_line();
      line_ += '\n';
      link_start_ = std::min(link_start_, line_.size());
    }
    return;
  }
  if (name == "hr") {
    flush();
    emit_block("---", false, false);
    return;
  }
  if (name == "ul" || name == "ol" || name == "menu") {
    flush();
    if (!t.end) {
      if (lists_.empty())
        last_tight_ = false;  // a new list starts a new group of lines
      int first = -1;
      if (name == "ol") {
        first = 1;
        auto s = strings::trim_view(t.start, strings::ascii_space);
        if (!s.empty() && s.size() < 9
            && std::all_of(s.begin(), s.end(),
                           [](char c) { return c >= '0' && c <= '9'; }))
          first = std::stoi(std::string{s});
      }
      lists_.push_back(first);
    } else if (!lists_.empty()) {
      lists_.pop_back();
    }
    return;
  }
  if (name == "li") {
    flush();
    if (!t.end) {
      auto depth = lists_.empty() ? size_t{0} : lists_.size() - 1;
      prefix_.assign(std::min<size_t>(depth, 8) * 2, ' ');
      if (!lists_.empty() && lists_.back() >= 0)
        prefix_ += std::to_string(lists_.back()++) + ". ";
      else
        prefix_ += "- ";
      tight_ = true;
    } else {
      prefix_.clear();
    }
    return;
  }
  if (name == "blockquote") {
    flush();
    if (!t.end)
      ++quote_depth_;
    else if (quote_depth_ > 0)
      --quote_depth_;
    return;
  }
  if (name == "pre") {
    if (!t.end) {
      flush();
      pre_depth_ = 1;
      pre_.clear();
    }
    return;
  }
  if (name == "tr") {
    flush();
    if (!t.end) {
      tight_ = true;
      row_cells_ = 0;
    }
    return;
  }
  if (name == "td" || name == "th") {
    if (!t.end) {
      if (row_cells_ > 0) {
        rtrim_line();
        line_ += " | ";
      } else {
        tight_ = true;
      }
      ++row_cells_;
      ++cell_depth_;
    } else if (cell_depth_ > 0) {
      --cell_depth_;
    }
    return;
  }
  if (name == "table") {
    flush();
    last_tight_ = false;
    cell_depth_ = 0;
    row_cells_ = 0;
    return;
  }
  if (name == "a") {
    if (!t.end) {
      finalize_link();
      in_link_ = true;
      link_href_ = decode(t.href, false, true);
      link_start_ = line_.size();
    } else {
      finalize_link();
    }
    return;
  }
  if (name == "img" && !t.end) {
    image(t);
    return;
  }
  if (name == "code" || name == "kbd" || name == "samp" || name == "tt") {
    if (!t.end) {
      ++code_depth_;
      if (!line_.empty() && line_.back() != ' ' && line_.back() != '\n'
          && code_depth_ == 1)
        line_ += ' ';
      if (code_depth_ == 1)
        line_ += '`';
    } else if (code_depth_ > 0) {
      if (--code_depth_ == 0) {
        rtrim_line();
        line_ += '`';
      }
    }
    return;
  }
  if (block_element(name)) {
    flush();
    return;
  }
}

void converter::handle_in_pre(const tag& t) {
  if (t.name == "pre") {
    if (t.end) {
      if (--pre_depth_ == 0)
        emit_pre();
    } else {
      ++pre_depth_;
    }
  } else if (t.name == "br") {
    pre_ += '\n';
  }
}

void converter::image(const tag& t) {
  auto alt = collapse_spaces(decode(t.alt, true, true));
  auto src = strings::trim_view(t.src, strings::ascii_space);
  std::string piece;
  if (istarts_with(src, "data:")) {
    piece = alt.empty() ? "[IMAGE]" : "[IMAGE: " + alt + "]";
  } else if (!alt.empty()) {
    auto url = src.empty() || src.size() > 2000
                 ? std::string{}
                 : resolve_with(base_.get(), decode(src, false, true));
    piece = url.empty() ? "[IMAGE: " + alt + "]"
                        : "![" + alt + "](" + url + ")";
  } else {
    return;
  }
  if (pre_depth_ > 0)
    return;
  if (!line_.empty() && line_.back() != ' ' && line_.back() != '\n')
    line_ += ' ';
  line_ += piece;
}

} // namespace mibyan::html_detail
