// base/strings: the one set of ASCII string helpers. Each case pins the
// exact bytes a helper touches, since the private copies it replaced
// differed (which white space, which case).
#define BOOST_TEST_MODULE strings
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include "base/strings.hpp"

using namespace mibyan;

BOOST_AUTO_TEST_CASE(case_folding_touches_only_ascii_letters) {
  BOOST_CHECK_EQUAL(strings::lower("MiByAn-42_Z@["), "mibyan-42_z@[");
  BOOST_CHECK_EQUAL(strings::upper("mibyan-42_z`{"), "MIBYAN-42_Z`{");
  // UTF-8 bytes are kept as they are (no locale).
  BOOST_CHECK_EQUAL(strings::lower("\xC3\x84RGER"), "\xC3\x84rger");
  BOOST_CHECK_EQUAL(strings::upper("\xC3\xA4rger"), "\xC3\xA4RGER");
  BOOST_CHECK_EQUAL(strings::lower(""), "");
}

BOOST_AUTO_TEST_CASE(trim_removes_blank_by_default) {
  BOOST_CHECK_EQUAL(strings::trim(" \t\r\n x y \r\n\t "), "x y");
  BOOST_CHECK_EQUAL(strings::trim(" \t\r\n"), "");
  BOOST_CHECK_EQUAL(strings::trim(""), "");
  // \v and \f are not blank.
  BOOST_CHECK_EQUAL(strings::trim("\vx\f"), "\vx\f");
  BOOST_CHECK_EQUAL(strings::trim("\vx\f", strings::ascii_space), "x");
}

BOOST_AUTO_TEST_CASE(trim_with_a_character_set) {
  BOOST_CHECK_EQUAL(strings::trim_view("//a/b//", "/"), "a/b");
  BOOST_CHECK_EQUAL(strings::trim_left_view(" \tx \t", " \t"), "x \t");
  BOOST_CHECK_EQUAL(strings::trim_right_view(" \tx \t\r", " \t\r"), " \tx");
  BOOST_CHECK_EQUAL(strings::trim_left_view("   ", " "), "");
  BOOST_CHECK_EQUAL(strings::trim_right_view("   ", " "), "");
  // A view into the argument, not a copy.
  std::string s = "  abc  ";
  auto v = strings::trim_view(s);
  BOOST_CHECK(v.data() == s.data() + 2);
  BOOST_CHECK_EQUAL(v.size(), 3u);
}

BOOST_AUTO_TEST_CASE(prefix_suffix_and_case_blind_equality) {
  BOOST_CHECK(strings::starts_with("mibyan", "mib"));
  BOOST_CHECK(strings::starts_with("mibyan", ""));
  BOOST_CHECK(!strings::starts_with("mi", "mib"));
  BOOST_CHECK(!strings::starts_with("xmibyan", "mib"));
  BOOST_CHECK(strings::ends_with("file.json", ".json"));
  BOOST_CHECK(strings::ends_with("x", ""));
  BOOST_CHECK(!strings::ends_with("json", ".json"));
  BOOST_CHECK(!strings::ends_with("file.JSON", ".json"));
  BOOST_CHECK(strings::iequals("Content-Type", "content-TYPE"));
  BOOST_CHECK(!strings::iequals("Content-Type", "Content-Typ"));
  BOOST_CHECK(!strings::iequals("a[", "A{"));
  BOOST_CHECK(strings::iequals("", ""));
}

BOOST_AUTO_TEST_CASE(split_keeps_empty_pieces_and_join_inverts_it) {
  using v = std::vector<std::string>;
  BOOST_CHECK(strings::split("a,,b", ',') == (v{"a", "", "b"}));
  BOOST_CHECK(strings::split("", ',') == (v{""}));
  BOOST_CHECK(strings::split(",", ',') == (v{"", ""}));
  BOOST_CHECK(strings::split("abc", ',') == (v{"abc"}));
  for (std::string s : {"a,,b", "", ",", "x,y,z,"})
    BOOST_CHECK_EQUAL(strings::join(strings::split(s, ','), ","), s);
  BOOST_CHECK_EQUAL(strings::join({}, ", "), "");
  BOOST_CHECK_EQUAL(strings::join({"a", "b", "c"}, ", "), "a, b, c");
}
