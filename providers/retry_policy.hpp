// File: providers/retry_policy.hpp
//
// Retry decisions for provider calls (docs/providers.md, "Retries"): which failures are
// worth another attempt, which may go to the fallback provider, and how
// long to wait before attempt n. Pure decisions: the provider actor does
// the waiting (with delayed_send, never by sleeping).
//
// Classes:
//   429 rate_limit, 408 timeout, 500/502 server, 503/529 overloaded, other
//   5xx server, transport errors and empty/invalid bodies -> retry, then
//   fallback once the attempts are spent;
//   401/403 auth, 402 billing, 404 not_found -> no retry, fallback;
//   400 and other 4xx format, 413 payload_too_large, context overflow
//   bodies, TLS certificate failures -> no retry, no fallback (the request
//   or the setup must change first).
//
// Waits: `Retry-After` seconds (capped at 600) when the server sent one;
// otherwise d = min(base * 2^(n-1), cap) plus uniform jitter in [0, d/2],
// with base 2 s / cap 60 s (5 s / 120 s for empty or invalid bodies),
// multiplied by `backoff_scale` (tests use 0.01). Retry-After is the
// server's instruction and is not scaled.
//
// Thread safety: a `retry_policy` has one owner (its random source is
// stateful); `classify` and `parse_retry_after` are pure.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "messages/chat.hpp"

namespace mibyan {

/// What kind of failure an attempt ended in.
enum class failure_class : uint8_t {
  none,               // success
  rate_limit,         // 429
  timeout,            // 408, request timeout, stale stream
  server,             // 500, 502, other 5xx
  overloaded,         // 503, 529, "overloaded" bodies
  transport,          // no complete response (connection, DNS, reset)
  invalid_body,       // 2xx with an empty, truncated or unparseable body
  auth,               // 401, 403
  billing,            // 402, 403 naming billing or credits
  not_found,          // 404 (model not found, policy)
  payload_too_large,  // 413
  context_overflow,   // the prompt does not fit the model's context
  format,             // 400, 422 and other 4xx: the request is wrong
  certificate,        // TLS certificate verification failed
};

/// Returns the class name, e.g. "rate_limit".
const char* to_string(failure_class x);

/// What to do after a failed attempt.
struct retry_decision {
  failure_class cls = failure_class::none;
  /// Another attempt on the same provider may succeed.
  bool retry = false;
  /// When not retried (or when retries are spent), the fallback provider
  /// may be tried.
  bool fallback = false;
  /// Use the slow schedule (base 5 s, cap 120 s).
  bool slow = false;
};

/// The facts about one attempt.
struct attempt_facts {
  /// HTTP status; 0 when no response arrived.
  int status = 0;
  /// Non-empty when the transfer failed (curl's message).
  std::string transport_error;
  /// The transfer hit a timeout (request or stale-stream).
  bool timed_out = false;
  /// A 2xx response whose body was empty, truncated or not a response.
  bool invalid_body = false;
  /// For invalid bodies: whether the decoder judged the failure transient
  /// (an in-stream error object may say otherwise).
  bool body_retryable = true;
  /// The provider's error message (used for body patterns: billing,
  /// overloaded, context overflow, request validation).
  std::string message;
};

/// Classifies one attempt.
retry_decision classify(const attempt_facts& facts);

/// Classifies a finished `chat_response` the way the provider actor does
/// (for callers that inspect a final error): status, `error` text and
/// `retryable`.
retry_decision classify_response(const chat_response& resp);

/// Parses a Retry-After value: delta seconds ("3", "1.5") or an HTTP date.
/// Returns nullopt for a missing or unparseable value; negative waits
/// become 0.
std::optional<std::chrono::milliseconds>
parse_retry_after(std::string_view value,
                  std::chrono::system_clock::time_point now
                  = std::chrono::system_clock::now());

/// Backoff computation (see the file comment).
class retry_policy {
public:
  /// Returns a uniform random number in [0, 1).
  using random_source = std::function<double()>;

  struct settings {
    /// Attempts per call, the first included (agent.api_max_retries).
    int max_attempts = 3;
    /// Multiplies every computed backoff (not Retry-After).
    double backoff_scale = 1.0;
    /// Upper bound on an honoured Retry-After.
    std::chrono::milliseconds max_retry_after{600000};
  };

  /// `random` defaults to a seeded std::mt19937_64.
  explicit retry_policy(settings s, random_source random = {});

  const settings& config() const { return settings_; }

  /// Returns whether attempt `attempt` (1-based) may be followed by
  /// another one.
  bool can_retry(int attempt) const {
    return attempt < settings_.max_attempts;
  }

  /// Returns the wait before retry `n` (1-based: n = 1 is the wait after
  /// the first failed attempt). `retry_after` is the server's value if it
  /// sent one; `slow` selects the schedule for invalid bodies.
  std::chrono::milliseconds
  delay(int n, std::optional<std::chrono::milliseconds> retry_after,
        bool slow = false);

  /// The exponential part without jitter or scale: min(base * 2^(n-1),
  /// cap), in seconds.
  static double base_delay_seconds(int n, bool slow);

private:
  settings settings_;
  random_source random_;
};

} // namespace mibyan
