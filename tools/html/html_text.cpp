// HTML to text (tools/html/html_text.hpp), part: the converter's text,
// blocks and output, and the public functions. Scanning the markup and
// what each element does are in tools/html/html_elements.cpp; the class is
// declared in tools/html/html_converter.hpp.
#include "tools/html/html_text.hpp"

#include <unordered_set>

#include "tools/html/html_converter.hpp"
#include "tools/html/html_lexing.hpp"

namespace mibyan {

using namespace html_detail;

namespace html_detail {

html_document converter::run() {
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

void converter::text(std::string_view raw) {
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

void converter::raw_text(std::string_view raw) {
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

void converter::finalize_link() {
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

void converter::flush() {
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

void converter::emit_pre() {
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

void converter::emit_block(std::string_view block, bool tight, bool verbatim) {
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

} // namespace html_detail

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
      if (inline_tags.count(name) == 0)
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
