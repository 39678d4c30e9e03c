// json::parse_members: only the named top-level members, in place when the
// string has room for simdjson's padding.
#define BOOST_TEST_MODULE json_members
#include <boost/test/unit_test.hpp>

#include <string>

#include "base/json.hpp"

using namespace mibyan;

BOOST_AUTO_TEST_CASE(picks_the_named_members_of_every_kind) {
  std::string text = R"({"messages":[{"role":"user","content":"big"}],)"
                     R"("failed":false,"final_response":"a\nb \u00e9",)"
                     R"("error":null,"n":-3,"x":1.5,"o":{"k":[1,2]}})";
  auto r = json::parse_members(text, {"failed", "final_response", "error",
                                      "n", "x", "o"});
  BOOST_REQUIRE_MESSAGE(r, r.error);
  auto& v = *r.v;
  BOOST_CHECK(v.find("messages") == nullptr);
  BOOST_CHECK_EQUAL(v["failed"].as_bool(), false);
  BOOST_CHECK_EQUAL(v["final_response"].as_string(), "a\nb \xC3\xA9");
  BOOST_CHECK(v["error"].is_null());
  BOOST_CHECK_EQUAL(v["n"].as_int(), -3);
  BOOST_CHECK_EQUAL(v["o"]["k"].as_array().size(), 2u);
  // The string_view form (always copies) agrees.
  auto r2 = json::parse_members(std::string_view{text}, {"final_response"});
  BOOST_REQUIRE(r2);
  BOOST_CHECK_EQUAL((*r2.v)["final_response"].as_string(), "a\nb \xC3\xA9");
}

BOOST_AUTO_TEST_CASE(errors_are_reported) {
  BOOST_CHECK(!json::parse_members("[1,2]", {"a"}));
  BOOST_CHECK(!json::parse_members(std::string{"{\"a\": tru"}, {"a"}));
  std::string spare = "{\"a\":\"x\"}";
  spare.reserve(4096); // in-place path
  auto r = json::parse_members(spare, {"a"});
  BOOST_REQUIRE(r);
  BOOST_CHECK_EQUAL((*r.v)["a"].as_string(), "x");
}
