// File: tools/html/html_text.hpp
//
// HTML to readable, Markdown-flavoured text for the web tools.
//
// A tolerant one-pass scanner, not an HTML parser: it never builds a tree,
// runs in time linear in the input, uses no recursion, and accepts anything
// (unclosed tags, stray '<', huge attributes, binary garbage). What it
// produces:
// - headings as "# ", paragraphs separated by blank lines, list items as
//   "- " / "1. " (nested lists indented), table rows as "a | b | c",
//   blockquotes as "> ", <pre> as ``` fenced blocks, inline <code> in
//   backticks, <hr> as "---";
// - links as [text](href) with href resolved against the page URL (and
//   <base href>); fragment-only and javascript: links keep only their text;
// - images as ![alt](src) when they have alt text, base64 `data:` images as
//   [IMAGE: alt];
// - nothing from <head> (but <title>), script, style, noscript, template,
//   svg, math, iframe, textarea, select, button, nav, aside, form, and
//   header/footer outside <article>/<main>. If dropping those leaves no text
//   at all (e.g. an unclosed <form> around the page), the page is converted
//   again without dropping nav/aside/form/header/footer/button/select;
// - entities decoded (common named ones and all numeric ones), whitespace
//   collapsed.
//
// Thread-safe (no shared state).
#pragma once

#include <string>
#include <string_view>

namespace mibyan {

/// The readable content of an HTML page.
struct html_document {
  /// Content of the first <title>, entities decoded, whitespace collapsed.
  std::string title;
  /// The page text (see the file comment). Valid UTF-8 if the input was.
  std::string text;
};

/// Converts `html` to text. `page_url` (may be empty) resolves relative
/// link and image targets.
html_document html_to_text(std::string_view html,
                           std::string_view page_url = {});

/// Returns the text of an HTML fragment such as a search-result snippet:
/// tags removed, entities decoded, whitespace collapsed to single spaces.
std::string html_fragment_text(std::string_view html);

/// Decodes character references: named ones (the common subset: amp, lt,
/// gt, quot, apos, nbsp, copy, mdash, ...) and numeric ones (&#233;
/// &#xE9;). Unknown or malformed references stay as they are; invalid code
/// points become U+FFFD.
std::string decode_html_entities(std::string_view text);

/// Resolves `ref` against the absolute URL `base` (RFC 3986). Returns `ref`
/// unchanged when either cannot be parsed or `base` is empty.
std::string resolve_url(std::string_view base, std::string_view ref);

} // namespace mibyan
