#define BOOST_TEST_MODULE retry_policy
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <string>

#include "providers/retry_policy.hpp"

using namespace mibyan;
using std::chrono::milliseconds;

namespace {

retry_decision status(int s, std::string message = {}) {
  attempt_facts f;
  f.status = s;
  f.message = std::move(message);
  return classify(f);
}

void expect(const retry_decision& d, failure_class cls, bool retry,
            bool fallback) {
  BOOST_TEST(to_string(d.cls) == to_string(cls));
  BOOST_TEST(d.retry == retry);
  BOOST_TEST(d.fallback == fallback);
}

retry_policy fixed(double r, double scale = 1.0, int attempts = 3) {
  retry_policy::settings s;
  s.max_attempts = attempts;
  s.backoff_scale = scale;
  return retry_policy{s, [r] { return r; }};
}

} // namespace

BOOST_AUTO_TEST_CASE(success_is_no_failure) {
  expect(status(200), failure_class::none, false, false);
  expect(status(204), failure_class::none, false, false);
}

BOOST_AUTO_TEST_CASE(transient_statuses_are_retried_then_fall_back) {
  expect(status(429), failure_class::rate_limit, true, true);
  expect(status(429, "Overloaded, try later"), failure_class::overloaded,
         true, true);
  expect(status(408), failure_class::timeout, true, true);
  expect(status(500), failure_class::server, true, true);
  expect(status(502), failure_class::server, true, true);
  expect(status(504), failure_class::server, true, true);
  expect(status(503), failure_class::overloaded, true, true);
  expect(status(529), failure_class::overloaded, true, true);
}

BOOST_AUTO_TEST_CASE(auth_and_not_found_fall_back_without_retry) {
  expect(status(401), failure_class::auth, false, true);
  expect(status(403), failure_class::auth, false, true);
  expect(status(403, "Your credit balance is too low"),
         failure_class::billing, false, true);
  expect(status(402), failure_class::billing, false, true);
  expect(status(404), failure_class::not_found, false, true);
}

BOOST_AUTO_TEST_CASE(request_errors_neither_retry_nor_fall_back) {
  expect(status(400), failure_class::format, false, false);
  expect(status(422, "extra inputs are not permitted"),
         failure_class::format, false, false);
  expect(status(418), failure_class::format, false, false);
  expect(status(413), failure_class::payload_too_large, false, false);
  expect(status(400, "This model's maximum context length is 8192 tokens"),
         failure_class::context_overflow, false, false);
  expect(status(503, "prompt is too long: 250000 tokens"),
         failure_class::context_overflow, false, false);
  expect(status(500, "1 validation error for Request: extra inputs are "
                     "not permitted"),
         failure_class::format, false, false);
}

BOOST_AUTO_TEST_CASE(transport_failures) {
  attempt_facts f;
  f.transport_error = "Couldn't connect to server";
  expect(classify(f), failure_class::transport, true, true);
  f.timed_out = true;
  f.transport_error = "Timeout was reached";
  expect(classify(f), failure_class::timeout, true, true);
  f.timed_out = false;
  f.transport_error = "SSL certificate problem: self-signed certificate";
  expect(classify(f), failure_class::certificate, false, false);
  attempt_facts none; // status 0 without an error text
  expect(classify(none), failure_class::transport, true, true);
}

BOOST_AUTO_TEST_CASE(invalid_bodies_use_the_slow_schedule) {
  attempt_facts f;
  f.status = 200;
  f.invalid_body = true;
  f.message = "empty stream";
  auto d = classify(f);
  expect(d, failure_class::invalid_body, true, true);
  BOOST_TEST(d.slow);
  f.body_retryable = false; // e.g. an in-stream invalid_request_error
  expect(classify(f), failure_class::format, false, false);
  f.body_retryable = true;
  f.message = "stream error: overloaded_error";
  expect(classify(f), failure_class::overloaded, true, true);
  BOOST_TEST(!classify(f).slow);
}

BOOST_AUTO_TEST_CASE(classify_response_reads_a_final_response) {
  chat_response r;
  r.http_status = 401;
  r.error = "HTTP 401: bad key";
  expect(classify_response(r), failure_class::auth, false, true);
  chat_response t;
  t.error = "request timed out: Timeout was reached";
  expect(classify_response(t), failure_class::timeout, true, true);
  chat_response e;
  e.http_status = 200;
  e.error = "empty stream";
  e.retryable = true;
  expect(classify_response(e), failure_class::invalid_body, true, true);
  chat_response ok;
  ok.http_status = 200;
  expect(classify_response(ok), failure_class::none, false, false);
}

BOOST_AUTO_TEST_CASE(exponential_backoff_doubles_to_the_cap) {
  auto p = fixed(0.0);
  BOOST_TEST(p.delay(1, std::nullopt).count() == 2000);
  BOOST_TEST(p.delay(2, std::nullopt).count() == 4000);
  BOOST_TEST(p.delay(3, std::nullopt).count() == 8000);
  BOOST_TEST(p.delay(5, std::nullopt).count() == 32000);
  BOOST_TEST(p.delay(6, std::nullopt).count() == 60000);
  BOOST_TEST(p.delay(1000, std::nullopt).count() == 60000);
  BOOST_TEST(p.delay(0, std::nullopt).count() == 2000);
  BOOST_TEST(p.delay(-3, std::nullopt).count() == 2000);
  BOOST_TEST(p.delay(1, std::nullopt, true).count() == 5000);
  BOOST_TEST(p.delay(2, std::nullopt, true).count() == 10000);
  BOOST_TEST(p.delay(9, std::nullopt, true).count() == 120000);
}

BOOST_AUTO_TEST_CASE(jitter_adds_up_to_half_the_delay) {
  BOOST_TEST(fixed(0.5).delay(1, std::nullopt).count() == 2500);
  BOOST_TEST(fixed(0.999999).delay(1, std::nullopt).count() == 2999);
  BOOST_TEST(fixed(0.5).delay(6, std::nullopt).count() == 75000);
  // Out-of-range sources are clamped.
  BOOST_TEST(fixed(7.0).delay(1, std::nullopt).count() == 3000);
  BOOST_TEST(fixed(-1.0).delay(1, std::nullopt).count() == 2000);
  // The default source stays within [d, 1.5 d] and varies.
  retry_policy p{retry_policy::settings{}};
  int64_t lo = 1 << 30, hi = 0;
  for (int i = 0; i < 500; ++i) {
    auto d = p.delay(2, std::nullopt).count();
    lo = std::min(lo, d);
    hi = std::max(hi, d);
  }
  BOOST_TEST(lo >= 4000);
  BOOST_TEST(hi <= 6000);
  BOOST_TEST(hi - lo > 500);
}

BOOST_AUTO_TEST_CASE(scale_shrinks_backoff_but_not_retry_after) {
  auto p = fixed(0.0, 0.01);
  BOOST_TEST(p.delay(1, std::nullopt).count() == 20);
  BOOST_TEST(p.delay(3, std::nullopt).count() == 80);
  BOOST_TEST(p.delay(1, milliseconds{3000}).count() == 3000);
  auto zero = fixed(0.0, 0.0);
  BOOST_TEST(zero.delay(4, std::nullopt).count() == 0);
  // A nonsensical scale falls back to 1.
  auto bad = fixed(0.0, -5.0);
  BOOST_TEST(bad.delay(1, std::nullopt).count() == 2000);
}

BOOST_AUTO_TEST_CASE(retry_after_is_capped) {
  auto p = fixed(0.9);
  BOOST_TEST(p.delay(1, milliseconds{1000}).count() == 1000);
  BOOST_TEST(p.delay(4, milliseconds{0}).count() == 0);
  BOOST_TEST(p.delay(1, milliseconds{10000000}).count() == 600000);
  BOOST_TEST(p.delay(1, milliseconds{-50}).count() == 0);
}

BOOST_AUTO_TEST_CASE(attempt_count) {
  auto p = fixed(0.0, 1.0, 3);
  BOOST_TEST(p.can_retry(1));
  BOOST_TEST(p.can_retry(2));
  BOOST_TEST(!p.can_retry(3));
  BOOST_TEST(!p.can_retry(4));
  auto one = fixed(0.0, 1.0, 1);
  BOOST_TEST(!one.can_retry(1));
  auto clamped = fixed(0.0, 1.0, -2);
  BOOST_TEST(clamped.config().max_attempts == 1);
  BOOST_TEST(!clamped.can_retry(1));
}

BOOST_AUTO_TEST_CASE(retry_after_parsing) {
  BOOST_TEST(parse_retry_after("1")->count() == 1000);
  BOOST_TEST(parse_retry_after(" 2 ")->count() == 2000);
  BOOST_TEST(parse_retry_after("1.5")->count() == 1500);
  BOOST_TEST(parse_retry_after("0")->count() == 0);
  BOOST_TEST(parse_retry_after("-5")->count() == 0);
  BOOST_TEST(!parse_retry_after(""));
  BOOST_TEST(!parse_retry_after("   "));
  BOOST_TEST(!parse_retry_after("soon"));
  BOOST_TEST(!parse_retry_after("1x"));
  BOOST_TEST(!parse_retry_after("nan"));
  BOOST_TEST(!parse_retry_after(std::string(100, '9')));
  // HTTP dates, relative to a fixed "now".
  auto now = std::chrono::system_clock::from_time_t(1445412470); // 07:27:50
  auto d = parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now);
  BOOST_REQUIRE(d.has_value());
  BOOST_TEST(d->count() == 10000);
  auto past = parse_retry_after("Wed, 21 Oct 2015 07:00:00 GMT", now);
  BOOST_REQUIRE(past.has_value());
  BOOST_TEST(past->count() == 0);
  BOOST_TEST(!parse_retry_after("Wed, 21 Oct 2015 07:28:00", now));
  BOOST_TEST(!parse_retry_after("Wed, 99 Foo 2015 07:28:00 GMT", now));
}

BOOST_AUTO_TEST_CASE(class_names) {
  BOOST_TEST(std::string{to_string(failure_class::rate_limit)}
             == "rate_limit");
  BOOST_TEST(std::string{to_string(failure_class::context_overflow)}
             == "context_overflow");
  BOOST_TEST(std::string{to_string(failure_class::certificate)}
             == "certificate");
  BOOST_TEST(retry_policy::base_delay_seconds(1, false) == 2.0);
  BOOST_TEST(retry_policy::base_delay_seconds(40, true) == 120.0);
}
