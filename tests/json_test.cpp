#define BOOST_TEST_MODULE json
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "base/json.hpp"

using namespace mibyan;

BOOST_AUTO_TEST_CASE(parse_and_dump_round_trip) {
  auto text = R"({"a":1,"b":[true,false,null],"c":"x\ny","d":1.5,"e":{}})";
  auto r = json::parse(text);
  BOOST_REQUIRE(r);
  BOOST_TEST(r.v->dump() == text);
  BOOST_TEST(r.v->find("a")->as_int() == 1);
  BOOST_TEST(r.v->find("d")->as_double() == 1.5);
  BOOST_TEST(r.v->find("b")->size() == 3u);
}

namespace {

// append_quoted one byte at a time: the escapes, and the UTF-8 sanitised
// the way sanitize_utf8 does it.
std::string quoted_reference(std::string_view s) {
  std::string out = "\"";
  auto clean = json::sanitize_utf8(s);
  for (unsigned char c : clean) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

} // namespace

BOOST_AUTO_TEST_CASE(quoting_matches_a_byte_by_byte_reading) {
  // Runs of plain text of every length around the 16-byte steps, then
  // every byte value, UTF-8 sequences valid and cut, at every offset.
  std::vector<std::string> pieces = {"\"", "\\", "\n", "\r", "\t", "\b",
                                     "\f", std::string(1, '\0'), "\x01",
                                     "\x1f", "\x7f", "\xc3\xa9",
                                     "\xe2\x82\xac", "\xf0\x9f\x98\x80",
                                     "\xc3", "\xe2\x82", "\xff", "\xed\xa0\x80"};
  for (int c = 0; c < 256; ++c)
    pieces.push_back(std::string(1, static_cast<char>(c)));
  size_t checked = 0;
  for (size_t before = 0; before < 40; ++before)
    for (auto& p : pieces)
      for (size_t after : {size_t{0}, size_t{3}, size_t{17}}) {
        std::string s = std::string(before, 'a') + p + std::string(after, 'z');
        std::string out = "prefix";
        json::append_quoted(out, s);
        BOOST_TEST_CONTEXT("piece " << json::quote(p) << " after " << before) {
          BOOST_TEST(out == "prefix" + quoted_reference(s));
        }
        ++checked;
      }
  BOOST_TEST(checked > 10000u);
}

BOOST_AUTO_TEST_CASE(objects_keep_insertion_order_and_set_replaces) {
  json::value v;
  v["z"] = 1;
  v["a"] = 2;
  v.set("z", 3);
  BOOST_TEST(v.dump() == R"({"z":3,"a":2})");
  BOOST_TEST(v.erase("z"));
  BOOST_TEST(!v.erase("z"));
  BOOST_TEST(v.dump() == R"({"a":2})");
}

BOOST_AUTO_TEST_CASE(bad_input_gives_errors_not_crashes) {
  for (auto text : {"", "{", "[1,", "{\"a\" 1}", "nul", "\"abc", "{}}",
                    "[1,2,]"}) {
    auto r = json::parse(text);
    BOOST_TEST(!r, "accepted: " << text);
    BOOST_TEST(!r.error.empty());
  }
  std::string deep(5000, '[');
  deep += std::string(5000, ']');
  BOOST_TEST(!json::parse(deep));
}

BOOST_AUTO_TEST_CASE(strings_are_escaped_and_utf8_sanitised) {
  json::value v{std::string{"q\"b\\s\x01\t\xff" "é"}};
  auto out = v.dump();
  BOOST_TEST(out == "\"q\\\"b\\\\s\\u0001\\t\xEF\xBF\xBD" "é\"");
  auto back = json::parse(out);
  BOOST_REQUIRE(back);
  BOOST_TEST(back.v->as_string() == "q\"b\\s\x01\t\xEF\xBF\xBD" "é");
}

BOOST_AUTO_TEST_CASE(numbers_keep_their_kind) {
  auto r = json::parse(R"([9223372036854775807, 18446744073709551615, -3,
                          1e3, 0.1])");
  BOOST_REQUIRE(r);
  auto& xs = r.v->as_array();
  BOOST_TEST(xs[0].is_int());
  BOOST_TEST(xs[0].as_int() == INT64_MAX);
  BOOST_TEST(!xs[1].is_int()); // does not fit: kept as a double
  BOOST_TEST(xs[2].as_int() == -3);
  BOOST_TEST((xs[3].type() == json::kind::number));
  BOOST_TEST(json::value{0.1}.dump() == "0.1");
  BOOST_TEST(json::value{2.0}.dump() == "2.0");
  BOOST_TEST(json::value{std::nan("")}.dump() == "null");
}

BOOST_AUTO_TEST_CASE(copies_are_deep) {
  json::value a;
  a["list"].push_back(1);
  json::value b = a;
  b["list"].push_back(2);
  BOOST_TEST(a["list"].size() == 1u);
  BOOST_TEST(b["list"].size() == 2u);
  BOOST_TEST((a != b));
}
