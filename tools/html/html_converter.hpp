// File: tools/html/html_converter.hpp
//
// The HTML-to-text converter behind html_to_text (tools/html/html_text.hpp),
// internal to its two files: tools/html/html_elements.cpp (scanning the
// markup and what each element does) and tools/html/html_text.cpp (text,
// blocks and the output). One converter converts one document, on one
// thread; it keeps views into the input, which must outlive it.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "tools/html/html_lexing.hpp"
#include "tools/html/html_text.hpp"

namespace mibyan::html_detail {

/// A start or end tag as the converter reads it.
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

  html_document run();

  bool dropped_chrome() const { return dropped_chrome_; }

private:
  // -- scanning ---------------------------------------------------------------

  // Handles the markup at in_[pos_] == '<'; always advances pos_.
  void markup();

  void skip_past(char c) {
    auto end = in_.find(c, pos_);
    pos_ = end == std::string_view::npos ? in_.size() : end + 1;
  }

  std::string read_name();

  // Reads attributes up to and including the closing '>'.
  void read_attributes(tag& t);

  static void assign(tag& t, std::string_view name, std::string_view value);

  // Skips the content of a raw-text element up to its end tag.
  void skip_raw_text(const std::string& name);

  // -- elements ---------------------------------------------------------------

  bool chrome_element(const std::string& name) const;

  void handle(const tag& t);

  void handle_in_pre(const tag& t);

  void image(const tag& t);

  // -- text -------------------------------------------------------------------

  void text(std::string_view raw);

  // CDATA content: text outside pre, verbatim inside.
  void raw_text(std::string_view raw);

  // -- blocks -----------------------------------------------------------------

  void rtrim_line() {
    while (!line_.empty() && line_.back() == ' ')
      line_.pop_back();
  }

  void soft_break() {
    if (!line_.empty() && line_.back() != ' ' && line_.back() != '\n')
      line_ += ' ';
  }

  void finalize_link();

  void flush();

  void emit_pre();

  // Appends a block to the output: separated by a blank line, or by a line
  // break between consecutive tight blocks (list items, table rows); every
  // line prefixed for enclosing blockquotes.
  void emit_block(std::string_view block, bool tight, bool verbatim);

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

} // namespace mibyan::html_detail
