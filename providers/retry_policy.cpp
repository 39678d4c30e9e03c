#include "providers/retry_policy.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <random>

#include "base/strings.hpp"

namespace mibyan {

namespace {

bool contains_any(const std::string& text,
                  std::initializer_list<const char*> needles) {
  for (auto n : needles)
    if (text.find(n) != std::string::npos)
      return true;
  return false;
}

bool context_overflow_text(const std::string& m) {
  return contains_any(m, {"context length", "context_length_exceeded",
                          "maximum context", "context window",
                          "prompt is too long", "too many tokens",
                          "reduce the length", "input is too long",
                          "exceeds the context"});
}

bool billing_text(const std::string& m) {
  return contains_any(m, {"billing", "credit", "insufficient_quota",
                          "payment", "quota exceeded"});
}

retry_decision make(failure_class cls, bool retry, bool fallback,
                    bool slow = false) {
  return {cls, retry, fallback, slow};
}

} // namespace

const char* to_string(failure_class x) {
  switch (x) {
    case failure_class::none: return "none";
    case failure_class::rate_limit: return "rate_limit";
    case failure_class::timeout: return "timeout";
    case failure_class::server: return "server";
    case failure_class::overloaded: return "overloaded";
    case failure_class::transport: return "transport";
    case failure_class::invalid_body: return "invalid_body";
    case failure_class::auth: return "auth";
    case failure_class::billing: return "billing";
    case failure_class::not_found: return "not_found";
    case failure_class::payload_too_large: return "payload_too_large";
    case failure_class::context_overflow: return "context_overflow";
    case failure_class::format: return "format";
    case failure_class::certificate: return "certificate";
  }
  return "unknown";
}

retry_decision classify(const attempt_facts& f) {
  auto msg = strings::lower(f.message);
  if (!f.transport_error.empty()) {
    auto t = strings::lower(f.transport_error);
    if (contains_any(t, {"certificate", "ssl peer", "self signed",
                         "self-signed"}))
      return make(failure_class::certificate, false, false);
    if (f.timed_out)
      return make(failure_class::timeout, true, true);
    return make(failure_class::transport, true, true);
  }
  int s = f.status;
  if (s == 0)
    return make(failure_class::transport, true, true);
  if (s >= 200 && s < 300) {
    if (!f.invalid_body)
      return make(failure_class::none, false, false);
    if (!f.body_retryable)
      return make(failure_class::format, false, false);
    if (contains_any(msg, {"overloaded"}))
      return make(failure_class::overloaded, true, true);
    if (contains_any(msg, {"rate limit", "rate_limit"}))
      return make(failure_class::rate_limit, true, true);
    return make(failure_class::invalid_body, true, true, true);
  }
  switch (s) {
    case 401:
      return make(failure_class::auth, false, true);
    case 402:
      return make(failure_class::billing, false, true);
    case 403:
      return make(billing_text(msg) ? failure_class::billing
                                    : failure_class::auth,
                  false, true);
    case 404:
      return make(failure_class::not_found, false, true);
    case 408:
      return make(failure_class::timeout, true, true);
    case 413:
      return make(failure_class::payload_too_large, false, false);
    case 429:
      return make(contains_any(msg, {"overloaded"})
                    ? failure_class::overloaded
                    : failure_class::rate_limit,
                  true, true);
    default:
      break;
  }
  if (s >= 500) {
    if (context_overflow_text(msg))
      return make(failure_class::context_overflow, false, false);
    if ((s == 500 || s == 502)
        && contains_any(msg, {"extra inputs are not permitted",
                              "validation error", "invalid_request_error"}))
      return make(failure_class::format, false, false);
    if (s == 503 || s == 529 || contains_any(msg, {"overloaded"}))
      return make(failure_class::overloaded, true, true);
    return make(failure_class::server, true, true);
  }
  if (s >= 400) {
    if (context_overflow_text(msg))
      return make(failure_class::context_overflow, false, false);
    return make(failure_class::format, false, false);
  }
  // 1xx/3xx as a final status: the server did not answer the call.
  return make(failure_class::invalid_body, true, true, true);
}

retry_decision classify_response(const chat_response& resp) {
  attempt_facts f;
  f.status = resp.http_status;
  f.message = resp.error;
  if (resp.error.empty())
    return classify(f);
  if (resp.http_status == 0) {
    f.transport_error = resp.error;
    auto lowered = strings::lower(resp.error);
    f.timed_out = lowered.find("timeout") != std::string::npos
                  || lowered.find("timed out") != std::string::npos;
  } else if (resp.http_status >= 200 && resp.http_status < 300) {
    f.invalid_body = true;
    f.body_retryable = resp.retryable;
  }
  return classify(f);
}

std::optional<std::chrono::milliseconds>
parse_retry_after(std::string_view value,
                  std::chrono::system_clock::time_point now) {
  while (!value.empty() && std::isspace(static_cast<unsigned char>(
                             value.front())))
    value.remove_prefix(1);
  while (!value.empty() && std::isspace(static_cast<unsigned char>(
                             value.back())))
    value.remove_suffix(1);
  if (value.empty() || value.size() > 64)
    return std::nullopt;
  std::string text{value};
  if (std::isdigit(static_cast<unsigned char>(text[0])) || text[0] == '-'
      || text[0] == '.') {
    char* end = nullptr;
    double secs = std::strtod(text.c_str(), &end);
    if (end == text.c_str() || *end != '\0' || !std::isfinite(secs))
      return std::nullopt;
    secs = std::clamp(secs, 0.0, 1e7);
    return std::chrono::milliseconds{static_cast<int64_t>(secs * 1000.0)};
  }
  // HTTP-date, IMF-fixdate form: "Wed, 21 Oct 2015 07:28:00 GMT".
  std::tm tm{};
  auto rest = ::strptime(text.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &tm);
  if (rest == nullptr || *rest != '\0')
    return std::nullopt;
  auto when = std::chrono::system_clock::from_time_t(::timegm(&tm));
  auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(when
                                                                    - now);
  return std::max(wait, std::chrono::milliseconds{0});
}

retry_policy::retry_policy(settings s, random_source random)
  : settings_(s), random_(std::move(random)) {
  settings_.max_attempts = std::max(1, settings_.max_attempts);
  if (!(settings_.backoff_scale >= 0.0))
    settings_.backoff_scale = 1.0;
  if (!random_) {
    auto gen = std::make_shared<std::mt19937_64>(std::random_device{}());
    random_ = [gen] {
      return std::uniform_real_distribution<double>(0.0, 1.0)(*gen);
    };
  }
}

double retry_policy::base_delay_seconds(int n, bool slow) {
  double base = slow ? 5.0 : 2.0;
  double cap = slow ? 120.0 : 60.0;
  n = std::max(1, n);
  if (n > 30)
    return cap;
  return std::min(base * std::ldexp(1.0, n - 1), cap);
}

std::chrono::milliseconds
retry_policy::delay(int n, std::optional<std::chrono::milliseconds> ra,
                    bool slow) {
  if (ra)
    return std::min(std::max(*ra, std::chrono::milliseconds{0}),
                    settings_.max_retry_after);
  double d = base_delay_seconds(n, slow);
  double r = std::clamp(random_(), 0.0, 1.0);
  double total = (d + r * 0.5 * d) * settings_.backoff_scale;
  return std::chrono::milliseconds{static_cast<int64_t>(total * 1000.0)};
}

} // namespace mibyan
