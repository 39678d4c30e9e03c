#include "tools/html/html_text.hpp"

#include "tools/html/html_lexing.hpp"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <memory>
#include <unordered_set>
#include <utility>
#include <vector>

#include <curl/curl.h>

namespace mibyan {

using namespace html_detail;

namespace {


// -- the converter ------------------------------------------------------------

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

struct tag {
  std::string name;  // lower case
  bool end = false;
  bool self_closing = false;
  std::string_view href;
  std::string_view src;
  std::string_view alt;
  std::string_view start;  // <ol start="...">
};

class converter {
public:
  converter(std::string_view html, std::string_view page_url,
            bool drop_chrome)
    : in_(html), page_url_(page_url), drop_chrome_(drop_chrome) {
    last_dquote_ = in_.rfind('"');
    last_squote_ = in_.rfind('\'');
  }

  html_document run() {
    base_ = parse_base(page_url_);
    while (pos_ < in_.size()) {
      auto lt = in_.find('<', pos_);
      if (lt == std::string_view::npos) {
        text(in_.substr(pos_));
        break;
      }
      if (lt > pos_)
        text(in_.substr(pos_, lt - pos_));
      pos_ = lt;
      markup();
    }
    flush();
    if (pre_depth_ > 0)
      emit_pre();
    html_document doc;
    doc.title = std::move(title_);
    doc.text = std::move(out_);
    return doc;
  }

  bool dropped_chrome() const { return dropped_chrome_; }

private:
  // -- scanning ---------------------------------------------------------------

  // Handles the markup at in_[pos_] == '<'; always advances pos_.
  void markup() {
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

  void skip_past(char c) {
    auto end = in_.find(c, pos_);
    pos_ = end == std::string_view::npos ? in_.size() : end + 1;
  }

  std::string read_name() {
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

  // Reads attributes up to and including the closing '>'.
  void read_attributes(tag& t) {
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

  static void assign(tag& t, std::string_view name, std::string_view value) {
    if (strings::iequals(name, "href"))
      t.href = value;
    else if (strings::iequals(name, "src"))
      t.src = value;
    else if (strings::iequals(name, "alt"))
      t.alt = value;
    else if (strings::iequals(name, "start"))
      t.start = value;
  }

  // Skips the content of a raw-text element up to its end tag.
  void skip_raw_text(const std::string& name) {
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

  // -- elements ---------------------------------------------------------------

  bool chrome_element(const std::string& name) const {
    if (name == "nav" || name == "aside" || name == "form"
        || name == "button" || name == "select")
      return true;
    if (name == "header" || name == "footer")
      return article_depth_ == 0;
    return false;
  }

  void handle(const tag& t) {
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

  void handle_in_pre(const tag& t) {
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

  void image(const tag& t) {
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

  // -- text -------------------------------------------------------------------

  void text(std::string_view raw) {
    if (!skip_name_.empty() || in_head_)
      return;
    if (pre_depth_ > 0) {
      pre_ += decode(raw, true, false);
      return;
    }
    // Text before any block in <head>-less documents is fine; whitespace is
    // collapsed as it is appended.
    auto decoded = decode(raw, true, false);
    for (char c : decoded) {
      if (is_space(c)) {
        if (!line_.empty() && line_.back() != ' ' && line_.back() != '\n')
          line_ += ' ';
      } else {
        line_ += c;
      }
    }
  }

  // CDATA content: text outside pre, verbatim inside.
  void raw_text(std::string_view raw) {
    if (!skip_name_.empty() || in_head_)
      return;
    if (pre_depth_ > 0) {
      pre_.append(raw.data(), raw.size());
      return;
    }
    for (char c : raw) {
      if (is_space(c)) {
        if (!line_.empty() && line_.back() != ' ' && line_.back() != '\n')
          line_ += ' ';
      } else {
        line_ += c;
      }
    }
  }

  // -- blocks -----------------------------------------------------------------

  void rtrim_line() {
    while (!line_.empty() && line_.back() == ' ')
      line_.pop_back();
  }

  void soft_break() {
    if (!line_.empty() && line_.back() != ' ' && line_.back() != '\n')
      line_ += ' ';
  }

  void finalize_link() {
    if (!in_link_)
      return;
    in_link_ = false;
    if (link_start_ > line_.size())
      return;
    auto label = strings::trim_view(
      std::string_view{line_}.substr(link_start_), strings::ascii_space);
    auto href = strings::trim_view(link_href_, strings::ascii_space);
    if (label.empty() || href.empty() || href.front() == '#'
        || istarts_with(href, "javascript:") || href.size() > 2000)
      return;
    auto url = resolve_with(base_.get(), href);
    bool lead_space = link_start_ < line_.size() && line_[link_start_] == ' ';
    std::string linked = lead_space ? " [" : "[";
    linked.append(label.data(), label.size());
    linked += "](";
    linked += url;
    linked += ')';
    line_.replace(link_start_, std::string::npos, linked);
  }

  void flush() {
    finalize_link();
    if (code_depth_ > 0) {
      rtrim_line();
      line_ += '`';
      code_depth_ = 0;
    }
    auto content = strings::trim_view(line_, strings::ascii_space);
    if (content.empty() || content == "`" || content == "``") {
      line_.clear();
      return;
    }
    std::string block = prefix_;
    block.append(content.data(), content.size());
    emit_block(block, tight_, false);
    line_.clear();
    prefix_.clear();
    tight_ = false;
  }

  void emit_pre() {
    pre_depth_ = 0;
    std::string_view body{pre_};
    if (!body.empty() && body.front() == '\r')
      body.remove_prefix(1);
    if (!body.empty() && body.front() == '\n')
      body.remove_prefix(1);
    while (!body.empty() && is_space(body.back()))
      body.remove_suffix(1);
    if (!body.empty()) {
      std::string block = "```\n";
      block.append(body.data(), body.size());
      block += "\n```";
      emit_block(block, false, true);
    }
    pre_.clear();
  }

  // Appends a block to the output: separated by a blank line, or by a line
  // break between consecutive tight blocks (list items, table rows); every
  // line prefixed for enclosing blockquotes.
  void emit_block(std::string_view block, bool tight, bool verbatim) {
    if (!out_.empty())
      out_ += (tight && last_tight_) ? "\n" : "\n\n";
    last_tight_ = tight;
    std::string quote;
    for (int i = 0; i < std::min(quote_depth_, 8); ++i)
      quote += "> ";
    bool first = true;
    bool previous_empty = false;
    size_t start = 0;
    while (start <= block.size()) {
      auto nl = block.find('\n', start);
      auto line = block.substr(start, nl == std::string_view::npos
                                        ? std::string_view::npos
                                        : nl - start);
      if (!verbatim)
        while (!line.empty() && is_space(line.back()))
          line.remove_suffix(1);
      bool empty = line.empty();
      if (!(empty && previous_empty && !verbatim)) {
        if (!first)
          out_ += '\n';
        if (!quote.empty())
          out_ += empty ? std::string_view{quote}.substr(0, quote.size() - 1)
                        : std::string_view{quote};
        out_.append(line.data(), line.size());
        first = false;
      }
      previous_empty = empty;
      if (nl == std::string_view::npos)
        break;
      start = nl + 1;
    }
  }

  // -- state ------------------------------------------------------------------

  std::string_view in_;
  std::string_view page_url_;
  bool drop_chrome_;
  bool dropped_chrome_ = false;
  size_t pos_ = 0;
  size_t last_dquote_ = std::string_view::npos;
  size_t last_squote_ = std::string_view::npos;
  curlu_ptr base_;

  std::string out_;
  std::string line_;
  std::string prefix_;
  bool tight_ = false;
  bool last_tight_ = false;
  int quote_depth_ = 0;
  std::vector<int> lists_;  // next number of each open <ol>, -1 for <ul>

  bool in_link_ = false;
  std::string link_href_;
  size_t link_start_ = 0;

  int pre_depth_ = 0;
  std::string pre_;
  int code_depth_ = 0;
  int cell_depth_ = 0;
  int row_cells_ = 0;
  int article_depth_ = 0;

  std::string skip_name_;
  int skip_nesting_ = 0;
  bool in_head_ = false;

  std::string title_;
  bool have_title_ = false;
};

} // namespace

html_document html_to_text(std::string_view html, std::string_view page_url) {
  converter first{html, page_url, true};
  auto doc = first.run();
  if (doc.text.empty() && first.dropped_chrome()) {
    converter second{html, page_url, false};
    auto again = second.run();
    again.title = std::move(doc.title);
    return again;
  }
  return doc;
}

std::string html_fragment_text(std::string_view html) {
  static const std::unordered_set<std::string_view> inline_tags = {
    "a", "abbr", "b", "bdi", "cite", "code", "em", "i", "kbd", "mark", "q",
    "s", "small", "span", "strong", "sub", "sup", "u", "wbr",
  };
  std::string stripped;
  stripped.reserve(html.size());
  for (size_t i = 0; i < html.size();) {
    char c = html[i];
    if (c == '<' && i + 1 < html.size()
        && (is_alpha(html[i + 1]) || html[i + 1] == '/'
            || html[i + 1] == '!')) {
      auto gt = html.find('>', i);
      if (gt == std::string_view::npos)
        break;
      size_t j = i + 1;
      if (j < gt && html[j] == '/')
        ++j;
      std::string name;
      while (j < gt && is_alnum(html[j]) && name.size() < 16)
        name += to_lower(html[j++]);
      if (!in_set(inline_tags, name))
        stripped += ' ';
      i = gt + 1;
      continue;
    }
    stripped += c;
    ++i;
  }
  return collapse_spaces(decode(stripped, true, false));
}

std::string decode_html_entities(std::string_view text) {
  return decode(text, false, false);
}

std::string resolve_url(std::string_view base, std::string_view ref) {
  auto h = parse_base(base);
  if (!h)
    return std::string{ref};
  return resolve_with(h.get(), ref);
}

} // namespace mibyan
