#define BOOST_TEST_MODULE sse_parser
#include <boost/test/unit_test.hpp>

#include <random>
#include <string>
#include <vector>

#include "base/sse_parser.hpp"

using namespace mibyan;

namespace {

std::vector<sse_event> parse_all(std::string_view text,
                                 sse_parser* p_out = nullptr) {
  sse_parser local;
  auto& p = p_out != nullptr ? *p_out : local;
  std::vector<sse_event> out;
  BOOST_TEST(p.feed(text, out));
  BOOST_TEST(p.finish(out));
  return out;
}

std::vector<sse_event> parse_split(std::string_view text,
                                   const std::vector<size_t>& cuts) {
  sse_parser p;
  std::vector<sse_event> out;
  size_t pos = 0;
  for (auto c : cuts) {
    BOOST_TEST(p.feed(text.substr(pos, c - pos), out));
    pos = c;
  }
  BOOST_TEST(p.feed(text.substr(pos), out));
  BOOST_TEST(p.finish(out));
  return out;
}

bool same(const std::vector<sse_event>& x, const std::vector<sse_event>& y) {
  if (x.size() != y.size())
    return false;
  for (size_t i = 0; i < x.size(); ++i)
    if (x[i].event != y[i].event || x[i].data != y[i].data
        || x[i].id != y[i].id)
      return false;
  return true;
}

} // namespace

BOOST_AUTO_TEST_CASE(lf_events_with_fields) {
  sse_parser p;
  auto evs = parse_all("data: {\"a\":1}\n\n"
                       "event: message_start\n"
                       "id: 7\n"
                       "data: x\n\n"
                       "data: y\n\n",
                       &p);
  BOOST_REQUIRE(evs.size() == 3u);
  BOOST_TEST(evs[0].event == "message");
  BOOST_TEST(evs[0].data == "{\"a\":1}");
  BOOST_TEST(evs[0].id == "");
  BOOST_TEST(evs[1].event == "message_start");
  BOOST_TEST(evs[1].data == "x");
  BOOST_TEST(evs[1].id == "7");
  // The event type resets after dispatch; the last id persists.
  BOOST_TEST(evs[2].event == "message");
  BOOST_TEST(evs[2].id == "7");
  BOOST_TEST(p.events() == 3u);
  BOOST_TEST(!p.unterminated_final_event());
}

BOOST_AUTO_TEST_CASE(crlf_and_cr_line_endings) {
  auto crlf = parse_all("data: a\r\n\r\ndata: b\r\n\r\n");
  BOOST_REQUIRE(crlf.size() == 2u);
  BOOST_TEST(crlf[0].data == "a");
  BOOST_TEST(crlf[1].data == "b");
  auto cr = parse_all("data: a\r\rdata: b\r\r");
  BOOST_REQUIRE(cr.size() == 2u);
  BOOST_TEST(cr[1].data == "b");
  auto mixed = parse_all("data: a\rdata: b\r\n\ndata: c\n\r\n");
  BOOST_REQUIRE(mixed.size() == 2u);
  BOOST_TEST(mixed[0].data == "a\nb");
  BOOST_TEST(mixed[1].data == "c");
}

BOOST_AUTO_TEST_CASE(crlf_split_between_feeds_is_one_line_end) {
  sse_parser p;
  std::vector<sse_event> out;
  BOOST_TEST(p.feed("data: a\r", out));
  BOOST_TEST(p.feed("\n", out));
  BOOST_TEST(out.empty()); // "\r\n" is one line end, not a blank line
  BOOST_TEST(p.feed("\r", out));
  BOOST_TEST(out.size() == 1u);
  BOOST_TEST(p.feed("\ndata: b\r", out));
  BOOST_TEST(p.feed("\r", out));
  BOOST_REQUIRE(out.size() == 2u);
  BOOST_TEST(out[1].data == "b");
}

BOOST_AUTO_TEST_CASE(multiline_data_and_value_spacing) {
  auto evs = parse_all("data: line1\ndata:line2\ndata:  two spaces\ndata\n\n");
  BOOST_REQUIRE(evs.size() == 1u);
  BOOST_TEST(evs[0].data == "line1\nline2\n two spaces\n");
  // "data:" alone is an (empty) data field and dispatches.
  auto empty = parse_all("data:\n\n");
  BOOST_REQUIRE(empty.size() == 1u);
  BOOST_TEST(empty[0].data == "");
}

BOOST_AUTO_TEST_CASE(comments_unknown_fields_retry_and_blank_lines) {
  sse_parser p;
  auto evs = parse_all(": OPENROUTER PROCESSING\n\n"
                       ":\n"
                       "\n\n\n"
                       "foo: bar\n"
                       "retry: 2500\n"
                       "event: ignored-without-data\n\n"
                       "data: x\n"
                       ": comment inside an event\n"
                       "\n",
                       &p);
  BOOST_REQUIRE(evs.size() == 1u);
  BOOST_TEST(evs[0].data == "x");
  BOOST_TEST(evs[0].event == "message"); // reset by the blank line
  BOOST_TEST(p.comments() == 3u);
  BOOST_TEST(p.retry_ms() == 2500);
  sse_parser q;
  parse_all("retry: soon\n\n", &q);
  BOOST_TEST(q.retry_ms() == -1);
}

BOOST_AUTO_TEST_CASE(id_with_nul_is_ignored) {
  std::string text = "id: good\ndata: a\n\nid: b";
  text += '\0';
  text += "d\ndata: b\n\n";
  auto evs = parse_all(text);
  BOOST_REQUIRE(evs.size() == 2u);
  BOOST_TEST(evs[1].id == "good");
}

BOOST_AUTO_TEST_CASE(bom_is_skipped_only_at_the_start) {
  auto evs = parse_all("\xEF\xBB\xBF" "data: x\n\n");
  BOOST_REQUIRE(evs.size() == 1u);
  BOOST_TEST(evs[0].data == "x");
  // Split byte by byte across feeds.
  auto split = parse_split("\xEF\xBB\xBF" "data: x\n\n", {1, 2, 3, 4});
  BOOST_TEST(same(split, evs));
  // A BOM later on is data.
  auto later = parse_all("data: \xEF\xBB\xBFy\n\n");
  BOOST_REQUIRE(later.size() == 1u);
  BOOST_TEST(later[0].data == "\xEF\xBB\xBFy");
  // A lone BOM prefix byte at the end is not swallowed silently.
  auto partial = parse_all("\xEF");
  BOOST_TEST(partial.empty());
  // Without a BOM, a first byte 0xEF is kept.
  auto notbom = parse_all("\xEF" "data: z\n\ndata: w\n\n");
  BOOST_TEST(notbom.size() == 1u); // the first line was "\xEFdata: z"
}

BOOST_AUTO_TEST_CASE(finish_flushes_an_unterminated_final_event) {
  sse_parser p;
  std::vector<sse_event> out;
  BOOST_TEST(p.feed("data: a\n\ndata: b", out));
  BOOST_TEST(out.size() == 1u);
  BOOST_TEST(p.finish(out));
  BOOST_REQUIRE(out.size() == 2u);
  BOOST_TEST(out[1].data == "b");
  BOOST_TEST(p.unterminated_final_event());
  // Further input is ignored.
  BOOST_TEST(p.feed("data: c\n\n", out));
  BOOST_TEST(out.size() == 2u);
  BOOST_TEST(p.finish(out));
  BOOST_TEST(out.size() == 2u);
  // A trailing line break without the blank line also flushes.
  sse_parser q;
  std::vector<sse_event> out2;
  q.feed("data: z\n", out2);
  BOOST_TEST(out2.empty());
  q.finish(out2);
  BOOST_TEST(out2.size() == 1u);
  BOOST_TEST(q.unterminated_final_event());
}

BOOST_AUTO_TEST_CASE(arbitrary_chunking_gives_identical_events) {
  std::string text = "\xEF\xBB\xBF: hello\r\n\r\nevent: e1\r\ndata: {\"t\":"
                     "\"caf\xC3\xA9 \xF0\x9F\x98\x80\"}\r\n\r\ndata: a\rdata: "
                     "b\r\rid: 9\ndata: [DONE]\n\ndata: tail";
  auto whole = parse_all(text);
  BOOST_REQUIRE(whole.size() == 4u);
  BOOST_TEST(whole[1].data == "a\nb");
  BOOST_TEST(whole[3].data == "tail");
  std::mt19937 rng{42};
  for (int pass = 0; pass < 200; ++pass) {
    std::uniform_int_distribution<size_t> d{1, text.size() - 1};
    std::vector<size_t> cuts;
    for (int i = 0; i < 1 + pass % 12; ++i)
      cuts.push_back(d(rng));
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    BOOST_TEST(same(parse_split(text, cuts), whole), "pass " << pass);
  }
  std::vector<size_t> every;
  for (size_t i = 1; i < text.size(); ++i)
    every.push_back(i);
  BOOST_TEST(same(parse_split(text, every), whole));
}

BOOST_AUTO_TEST_CASE(an_oversized_line_fails_with_bounded_memory) {
  sse_parser p{64};
  std::vector<sse_event> out;
  BOOST_TEST(p.feed("data: ok\n\n", out));
  BOOST_TEST(out.size() == 1u);
  std::string big(1000, 'x');
  BOOST_TEST(!p.feed("data: " + big, out));
  BOOST_TEST(p.failed());
  BOOST_TEST(p.error().find("longer than 64") != std::string::npos);
  // Once failed, the parser stays failed and emits nothing more.
  BOOST_TEST(!p.feed("\n\ndata: more\n\n", out));
  BOOST_TEST(!p.finish(out));
  BOOST_TEST(out.size() == 1u);
}

BOOST_AUTO_TEST_CASE(an_oversized_event_of_short_lines_fails) {
  sse_parser p{64};
  std::vector<sse_event> out;
  std::string text;
  for (int i = 0; i < 20; ++i)
    text += "data: 0123456789\n";
  BOOST_TEST(!p.feed(text, out));
  BOOST_TEST(p.error().find("event larger than 64") != std::string::npos);
  BOOST_TEST(out.empty());
}

BOOST_AUTO_TEST_CASE(binary_garbage_does_not_crash) {
  std::mt19937 rng{7};
  std::string junk;
  for (int i = 0; i < 100000; ++i)
    junk += static_cast<char>(rng() & 0xff);
  sse_parser p{4096};
  std::vector<sse_event> out;
  p.feed(junk, out);
  p.finish(out);
  for (auto& e : out)
    BOOST_TEST(e.data.size() <= 4096u);
  BOOST_TEST(p.bytes() == junk.size());
}

BOOST_AUTO_TEST_CASE(empty_input_gives_no_events) {
  sse_parser p;
  std::vector<sse_event> out;
  BOOST_TEST(p.feed("", out));
  BOOST_TEST(p.finish(out));
  BOOST_TEST(out.empty());
  BOOST_TEST(p.events() == 0u);
}
