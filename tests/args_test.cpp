#define BOOST_TEST_MODULE args
#include <boost/test/unit_test.hpp>

#include "tools/args.hpp"

using namespace mibyan;

namespace {

json::value schema() {
  return *json::parse(R"({"type":"object","properties":{
    "path":{"type":"string"},
    "limit":{"type":"integer","minimum":1,"maximum":100},
    "flag":{"type":"boolean"},
    "urls":{"type":"array","items":{"type":"string"}},
    "mode":{"type":"string","enum":["a","b"]},
    "ratio":{"type":"number"}},
    "required":["path"]})").v;
}

std::optional<std::string> check(const char* text, json::value* out = nullptr) {
  auto v = *json::parse(text).v;
  auto valid = coerce_and_validate(schema(), v);
  if (out)
    *out = v;
  if (valid.ok())
    return std::nullopt;
  BOOST_TEST((valid.code == status_code::invalid_argument));
  return valid.error;
}

} // namespace

BOOST_AUTO_TEST_CASE(valid_arguments_pass) {
  BOOST_TEST(!check(R"({"path":"a","limit":5,"flag":true})"));
}

BOOST_AUTO_TEST_CASE(model_mistakes_are_coerced) {
  json::value v;
  BOOST_TEST(!check(R"({"path":"a","limit":"42","flag":"true",
                        "urls":"x","ratio":"0.5"})", &v));
  BOOST_TEST(v["limit"].as_int() == 42);
  BOOST_TEST(v["flag"].as_bool());
  BOOST_TEST(v["urls"].dump() == R"(["x"])");
  BOOST_TEST(v["ratio"].as_double() == 0.5);
  BOOST_TEST(!check(R"({"path":"a","urls":"[\"u\",\"v\"]","limit":3.0})", &v));
  BOOST_TEST(v["urls"].size() == 2u);
  BOOST_TEST(v["limit"].is_int());
}

BOOST_AUTO_TEST_CASE(nulls_mean_defaults) {
  json::value v;
  BOOST_TEST(!check(R"({"path":"a","limit":null})", &v));
  BOOST_TEST(v.find("limit") == nullptr);
}

BOOST_AUTO_TEST_CASE(violations_name_the_argument) {
  BOOST_TEST(*check(R"({})") == "Missing required argument 'path'");
  BOOST_TEST(check(R"({"path":5})")->find("'path'") != std::string::npos);
  BOOST_TEST(check(R"({"path":"a","limit":"abc"})")->find("integer")
             != std::string::npos);
  BOOST_TEST(check(R"({"path":"a","limit":0})")->find(">= 1")
             != std::string::npos);
  BOOST_TEST(check(R"({"path":"a","limit":1000})")->find("<= 100")
             != std::string::npos);
  BOOST_TEST(check(R"({"path":"a","mode":"c"})")->find("one of")
             != std::string::npos);
  BOOST_TEST(check(R"({"path":"a","urls":["ok",5]})")->find("urls[1]")
             != std::string::npos);
  json::value not_object{json::array{}};
  BOOST_TEST(!coerce_and_validate(schema(), not_object).ok());
}
