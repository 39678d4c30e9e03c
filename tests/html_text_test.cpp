#define BOOST_TEST_MODULE html_text
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <string>

#include "tools/html/html_text.hpp"
#include "base/json.hpp"

using namespace mibyan;

namespace {

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

std::string text_of(std::string_view html, std::string_view url = {}) {
  return html_to_text(html, url).text;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now()
                                       - start)
    .count();
}

} // namespace

BOOST_AUTO_TEST_CASE(structure_becomes_markdown) {
  auto doc = html_to_text(R"(<!DOCTYPE html>
<html><head><title>  The
  Title &amp; more </title><meta charset="utf-8"></head>
<body>
<h1>Main</h1>
<p>Para   one
continues.</p>
<h3>Third level</h3>
<ul><li>one</li><li>two
  <ul><li>nested</li></ul></li></ul>
<ol start="3"><li>three</li><li>four</li></ol>
<blockquote><p>quoted text</p><p>second</p></blockquote>
<table><tr><th>A</th><th>B</th></tr><tr><td>1</td><td><p>2</p></td></tr>
</table>
<pre>  keep   this
    spacing &lt;exactly&gt;</pre>
<p>Use <code>ls -l</code> here.<br>After break.</p>
<hr>
<p>End.</p>
</body></html>)");
  BOOST_TEST(doc.title == "The Title & more");
  auto expected = "# Main\n\n"
                  "Para one continues.\n\n"
                  "### Third level\n\n"
                  "- one\n"
                  "- two\n"
                  "  - nested\n\n"
                  "3. three\n"
                  "4. four\n\n"
                  "> quoted text\n\n"
                  "> second\n\n"
                  "A | B\n"
                  "1 | 2\n\n"
                  "```\n  keep   this\n    spacing <exactly>\n```\n\n"
                  "Use `ls -l` here.\n"
                  "After break.\n\n"
                  "---\n\n"
                  "End.";
  BOOST_TEST(doc.text == expected);
}

BOOST_AUTO_TEST_CASE(noise_is_dropped) {
  auto text = text_of(R"(<html><head><title>T</title>
<style>p { color: red } </style><script>var x = "<p>SCRIPT</p>";</script>
</head><body>
<nav><ul><li><a href="/">NAV</a></li></ul></nav>
<header>SITE HEADER</header>
<script type="text/javascript">document.write("</div>JS");</script>
<noscript>NOSCRIPT</noscript>
<svg viewBox="0 0 1 1"><text>SVG TEXT</text></svg>
<aside>ASIDE</aside>
<form><input name=q><button>BUTTON</button>FORM TEXT</form>
<template><p>TEMPLATE</p></template>
<main><header><h1>Article title</h1></header><p>Body text.</p></main>
<!-- COMMENT <p>inside</p> -->
<footer>FOOTER</footer>
</body></html>)");
  for (auto noise : {"SCRIPT", "NAV", "SITE HEADER", "JS", "NOSCRIPT",
                     "SVG TEXT", "ASIDE", "BUTTON", "FORM TEXT", "TEMPLATE",
                     "COMMENT", "inside", "FOOTER", "color"})
    BOOST_TEST(!contains(text, noise), noise << " in: " << text);
  // A header inside <main>/<article> is content.
  BOOST_TEST(text == "# Article title\n\nBody text.");
}

BOOST_AUTO_TEST_CASE(links_are_resolved) {
  auto text = text_of(R"html(<p><a href="/abs">absolute path</a>
<a href="rel/page.html">relative</a> <a href="../up">up</a>
<a href="https://other.example/x">other</a>
<a href="?q=1&amp;r=2">query</a> <a href="#frag">fragment only</a>
<a href="javascript:void(0)">js</a> <a href="mailto:a@b.c">mail</a>
<a href="//cdn.example/lib">scheme relative</a>
<a href="/empty"></a><a>no href</a></p>)html",
                      "https://example.com/dir/page?x=1");
  BOOST_TEST(contains(text, "[absolute path](https://example.com/abs)"), text);
  BOOST_TEST(contains(text,
                      "[relative](https://example.com/dir/rel/page.html)"));
  BOOST_TEST(contains(text, "[up](https://example.com/up)"));
  BOOST_TEST(contains(text, "[other](https://other.example/x)"));
  BOOST_TEST(contains(text, "[query](https://example.com/dir/page?q=1&r=2)"));
  BOOST_TEST(contains(text, " fragment only "));
  BOOST_TEST(!contains(text, "#frag"));
  BOOST_TEST(!contains(text, "javascript"));
  BOOST_TEST(contains(text, "[mail](mailto:a@b.c)"));
  BOOST_TEST(contains(text, "[scheme relative](https://cdn.example/lib)"));
  BOOST_TEST(contains(text, "no href"));
  BOOST_TEST(!contains(text, "/empty"));
}

BOOST_AUTO_TEST_CASE(base_href_and_missing_page_url) {
  auto text = text_of(R"(<head><base href="https://base.example/root/">
</head><body><p><a href="x">x</a></p></body>)",
                      "https://page.example/");
  BOOST_TEST(text == "[x](https://base.example/root/x)");
  BOOST_TEST(text_of(R"(<a href="rel">r</a>)") == "[r](rel)");
}

BOOST_AUTO_TEST_CASE(images) {
  auto text = text_of(
    R"(<p><img src="data:image/png;base64,iVBORw0KGgo=" alt="A chart">
<img src="data:image/gif;base64,R0lGOD"> <img src="/logo.png" alt="Logo">
<img src="/pixel.gif"></p>)",
    "https://example.com/");
  BOOST_TEST(text == "[IMAGE: A chart] [IMAGE] ![Logo](https://example.com/"
                     "logo.png)");
  // A huge data: URI is never copied into the output.
  std::string big = "<img alt=\"big\" src=\"data:image/png;base64,"
                    + std::string(3 * 1024 * 1024, 'A') + "\">";
  BOOST_TEST(text_of(big) == "[IMAGE: big]");
}

BOOST_AUTO_TEST_CASE(entities) {
  BOOST_TEST(decode_html_entities("a &amp; b &lt;c&gt; &quot;d&quot; &#39;e"
                                  "&#x27; &copy; &mdash; &hellip;")
             == "a & b <c> \"d\" 'e' \xC2\xA9 \xE2\x80\x94 \xE2\x80\xA6");
  BOOST_TEST(decode_html_entities("&#233;&#xE9;&#XE9;&eacute;")
             == "\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9");
  BOOST_TEST(decode_html_entities("&#x1F600;") == "\xF0\x9F\x98\x80");
  // Invalid code points become U+FFFD; C1 references map to cp1252.
  BOOST_TEST(decode_html_entities("&#0;&#xD800;&#x110000;&#99999999999;")
             == "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  BOOST_TEST(decode_html_entities("&#150;&#128;")
             == "\xE2\x80\x93\xE2\x82\xAC");
  // Unknown, unterminated and malformed references stay.
  BOOST_TEST(decode_html_entities("&bogus; & &; &# &#x; AT&T a&b")
             == "&bogus; & &; &# &#x; AT&T a&b");
  // Legacy names work without ';'.
  BOOST_TEST(decode_html_entities("&amp &lt3 &copy2024")
             == "& <3 \xC2\xA9" "2024");
  BOOST_TEST(decode_html_entities("&shy;x") == "x");
  // In text, &nbsp; is a space that collapses.
  BOOST_TEST(text_of("<p>a&nbsp;&nbsp; b</p>") == "a b");
}

BOOST_AUTO_TEST_CASE(fragments_for_snippets) {
  BOOST_TEST(html_fragment_text("About <strong>Py</strong>thon &amp; "
                                "<em>more</em><br>next")
             == "About Python & more next");
  BOOST_TEST(html_fragment_text("  plain   text ") == "plain text");
  BOOST_TEST(html_fragment_text("a < b and <unclosed") == "a < b and");
  BOOST_TEST(html_fragment_text("") == "");
}

BOOST_AUTO_TEST_CASE(resolve_urls) {
  BOOST_TEST(resolve_url("https://a.example/b/c", "d")
             == "https://a.example/b/d");
  BOOST_TEST(resolve_url("https://a.example/b/c", "/d")
             == "https://a.example/d");
  BOOST_TEST(resolve_url("https://a.example/b/c", "./x/../y")
             == "https://a.example/b/y");
  BOOST_TEST(resolve_url("", "d") == "d");
  BOOST_TEST(resolve_url("not a url", "d") == "d");
}

BOOST_AUTO_TEST_CASE(malformed_markup_never_breaks) {
  // Unclosed tags, stray '<', attributes without end, broken comments.
  BOOST_TEST(text_of("<p>a < b and c > d</p>") == "a < b and c > d");
  BOOST_TEST(text_of("<p>one<p>two<div>three") == "one\n\ntwo\n\nthree");
  BOOST_TEST(text_of("<p>x</p></div></span></p></ul>y") == "x\n\ny");
  BOOST_TEST(text_of("<b>bold <i>both</b> italic</i>") == "bold both italic");
  BOOST_TEST(text_of("<a href=\"/x>broken attr</a><p>after</p>")
               .find("after") != std::string::npos);
  BOOST_TEST(text_of("text <!-- unterminated comment") == "text");
  BOOST_TEST(text_of("<p>before</p><script>never closed") == "before");
  BOOST_TEST(text_of("<") == "<");
  BOOST_TEST(text_of("</") == "");
  BOOST_TEST(text_of("<<<>>>") == "<<<>>>");
  BOOST_TEST(text_of("<p") == "");
  BOOST_TEST(text_of("<p title='x") == "");
  BOOST_TEST(text_of("</ p>x") == "x");
  BOOST_TEST(text_of("<li>orphan item") == "- orphan item");
  BOOST_TEST(text_of("<td>a<td>b") == "a | b");
  BOOST_TEST(text_of("<pre>unclosed\n  pre") == "```\nunclosed\n  pre\n```");
  BOOST_TEST(text_of("<h2>unclosed heading") == "## unclosed heading");
  BOOST_TEST(text_of("<a href=x>unclosed link") == "[unclosed link](x)");
  BOOST_TEST(text_of("<![CDATA[raw <b> text]]>") == "raw <b> text");
  BOOST_TEST(text_of("<?xml version=\"1.0\"?><p>x</p>") == "x");
  BOOST_TEST(text_of("") == "");
  // Binary garbage and NULs.
  std::string junk;
  for (int i = 0; i < 5000; ++i)
    junk += static_cast<char>((i * 7919) % 256);
  auto out = html_to_text(junk);
  BOOST_TEST(out.text.size() <= junk.size() * 2);
  BOOST_TEST(json::value{out.text}.dump().size() > 0u);
}

BOOST_AUTO_TEST_CASE(unclosed_chrome_element_falls_back) {
  // An unclosed <form> around the page must not swallow everything.
  auto text = text_of("<body><form><h1>Title</h1><p>Body text</p></body>");
  BOOST_TEST(text == "# Title\n\nBody text");
}

BOOST_AUTO_TEST_CASE(huge_attributes_and_quotes_stay_linear) {
  // Thousands of tags with unterminated quotes must not rescan the rest of
  // the document for each tag.
  std::string html;
  for (int i = 0; i < 200000; ++i)
    html += "<a title='x>t ";
  auto start = std::chrono::steady_clock::now();
  auto out = html_to_text(html);
  BOOST_TEST(seconds_since(start) < 2.0);
  std::string huge_attr = "<p data-x=\"" + std::string(5 * 1024 * 1024, 'v')
                          + "\">after</p>";
  start = std::chrono::steady_clock::now();
  BOOST_TEST(text_of(huge_attr) == "after");
  BOOST_TEST(seconds_since(start) < 2.0);
}

BOOST_AUTO_TEST_CASE(ten_megabytes_of_nested_divs_in_bounded_time) {
  std::string html;
  const int depth = 10 * 1024 * 1024 / 11;
  html.reserve(static_cast<size_t>(depth) * 11 + 100);
  for (int i = 0; i < depth / 2; ++i)
    html += "<div><ul>";
  html += "<p>deep text</p>";
  for (int i = 0; i < depth / 2; ++i)
    html += "</ul></div>";
  auto start = std::chrono::steady_clock::now();
  auto out = html_to_text(html);
  auto secs = seconds_since(start);
  BOOST_TEST_MESSAGE("10 MB nested: " << secs << " s");
  BOOST_TEST(secs < 5.0);
  BOOST_TEST(out.text == "deep text");
  // Deeply nested lists keep a bounded indentation.
  std::string lists;
  for (int i = 0; i < 100000; ++i)
    lists += "<ul><li>x";
  out = html_to_text(lists);
  BOOST_TEST(out.text.size() < 100000u * 40);
}
