// Lone surrogates and invalid UTF-8 from a provider are replaced with
// U+FFFD at the codec edge instead of failing the turn; a complete 2xx
// body that still does not parse is not retried (issue 14).
#define BOOST_TEST_MODULE provider_sanitize
#include <boost/test/unit_test.hpp>

#include <string>

#include "providers/anthropic_codec.hpp"
#include "providers/codec_support.hpp"
#include "providers/openai_codec.hpp"
#include "providers/retry_policy.hpp"

using namespace mibyan;

namespace {

const std::string fffd = "\xEF\xBF\xBD";

std::string openai_body(const std::string& raw_content_json) {
  return R"({"id":"x","object":"chat.completion","model":"m","choices":[)"
         R"({"index":0,"message":{"role":"assistant","content":)"
         + raw_content_json + R"(},"finish_reason":"stop"}]})";
}

} // namespace

BOOST_AUTO_TEST_CASE(lone_high_surrogate_in_a_body) {
  auto r = openai::parse_response(200, openai_body(R"("a\ud800b")"));
  BOOST_REQUIRE_MESSAGE(r.error.empty(), r.error);
  BOOST_CHECK_EQUAL(r.content, "a" + fffd + "b");
}

BOOST_AUTO_TEST_CASE(lone_low_surrogate_and_high_at_the_end) {
  auto r = openai::parse_response(200, openai_body(R"("\udc00x\ud83d")"));
  BOOST_REQUIRE_MESSAGE(r.error.empty(), r.error);
  BOOST_CHECK_EQUAL(r.content, fffd + "x" + fffd);
}

BOOST_AUTO_TEST_CASE(invalid_utf8_bytes_in_a_body) {
  auto r = openai::parse_response(200, openai_body("\"caf\xC3 \xFF ok\""));
  BOOST_REQUIRE_MESSAGE(r.error.empty(), r.error);
  BOOST_CHECK_EQUAL(r.content, "caf" + fffd + " " + fffd + " ok");
}

BOOST_AUTO_TEST_CASE(valid_text_is_untouched) {
  // A proper pair, an escaped backslash before "ud800", plain escapes.
  auto raw = std::string{R"("\ud83d\ude00 \\ud800 \n")"};
  BOOST_CHECK_EQUAL(codec::repair_json_text(raw), raw);
  auto r = openai::parse_response(200, openai_body(raw));
  BOOST_REQUIRE_MESSAGE(r.error.empty(), r.error);
  BOOST_CHECK_EQUAL(r.content, "\xF0\x9F\x98\x80 \\ud800 \n");
}

BOOST_AUTO_TEST_CASE(streamed_chunks_are_repaired) {
  openai::stream_accumulator acc;
  acc.feed("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":"
           "\"x\\ud800y\"}}]}\n\n");
  acc.feed("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":"
           "\"\xFE!\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n");
  auto r = acc.finish(200);
  BOOST_REQUIRE_MESSAGE(r.error.empty(), r.error);
  BOOST_CHECK_EQUAL(r.content, "x" + fffd + "y" + fffd + "!");
}

BOOST_AUTO_TEST_CASE(anthropic_bodies_are_repaired) {
  std::string body = R"({"id":"m1","type":"message","role":"assistant",)"
                     R"("model":"c","content":[{"type":"text","text":)"
                     R"("hi \udfff"}],"stop_reason":"end_turn",)"
                     R"("usage":{"input_tokens":1,"output_tokens":1}})";
  auto r = anthropic::parse_response(200, body);
  BOOST_REQUIRE_MESSAGE(r.error.empty(), r.error);
  BOOST_CHECK_EQUAL(r.content, "hi " + fffd);
}

BOOST_AUTO_TEST_CASE(a_complete_unparseable_2xx_body_is_not_retried) {
  auto r = openai::parse_response(200, "{\"choices\": [ this is not json");
  BOOST_CHECK(!r.error.empty());
  BOOST_CHECK(!r.retryable);
  BOOST_CHECK(!classify_response(r).retry);
}
