// File: runtime/cron_delivery.hpp
//
// Where a scheduled run's answer goes (docs/cron.md, "Running, approvals
// and delivery"): `session` (always: the answer is the run's own session),
// `file:PATH` (the answer appended with a header), `webhook:URL` (a JSON
// POST, retried with backoff, under the URL guard) and `dashboard` (kept
// for the console's jobs page: the run record's flag, nothing to send).
//
// Thread: every function here blocks (file I/O, HTTP) and is called on the
// runtime's blocking pool, never on a CAF scheduler or I/O thread. CAF-free;
// never throws. A failed target never loses the answer: the caller keeps it
// in the session and the run record and reports `delivery_failed`.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.hpp"
#include "base/url_guard.hpp"

namespace mibyan {

class http_client;
struct options;

/// The final answer that is never delivered (the run is still recorded).
inline constexpr const char* cron_silent_answer = "[SILENT]";

/// Whether `answer` is exactly the silent marker (surrounding white space
/// ignored).
bool is_silent_answer(const std::string& answer);

/// One `deliver:` entry.
struct delivery_target {
  enum class kind { session, file, webhook, dashboard };
  kind type = kind::session;
  /// The path of `file:`, the URL of `webhook:` ("" otherwise).
  std::string value;
};

/// Parses "session", "dashboard", "file:PATH" or "webhook:URL" (a webhook
/// URL must pass validate_url). invalid_argument with the reason otherwise.
result<delivery_target> parse_delivery_target(const std::string& text);

/// What is delivered: the webhook's JSON body and the file's header.
struct delivery_payload {
  std::string job_id;
  std::string job_name;
  std::string run_id;
  /// The run's status as recorded ("ok", "error", ...).
  std::string status;
  std::string answer;
  std::string session_id;
  /// Unix milliseconds.
  int64_t scheduled_for_ms = 0;
  int64_t finished_at_ms = 0;
};

/// {"job":{"id","name"},"run_id","status","answer","session_id",
///  "scheduled_for","finished_at"} with the times in ISO 8601 UTC.
std::string webhook_body(const delivery_payload& p);

/// Set to stop waits between webhook attempts (the runtime is stopping).
/// Thread-safe.
class delivery_stop {
public:
  void stop();
  bool stopped() const;
  /// Waits `d` or until stop(); returns false when stopped.
  bool wait_for(std::chrono::milliseconds d);

private:
  mutable std::mutex mtx_;
  std::condition_variable cv_;
  bool stopped_ = false;
};

/// How webhooks are sent.
struct webhook_settings {
  /// The private-address rules (security.allow_private_urls or
  /// cron.allow_private_webhooks lift them).
  url_policy policy;
  /// Per attempt, connect included.
  std::chrono::milliseconds timeout{10000};
  /// Attempts in all (at least 1).
  int attempts = 3;
  /// The wait before attempt 2; doubled for each later one.
  std::chrono::milliseconds backoff{1000};
};

/// The webhook settings of the configuration (cron.webhook_timeout,
/// cron.webhook_attempts, cron.allow_private_webhooks, security.*).
webhook_settings webhook_settings_of(const options& cfg);

/// Appends `p.answer` to `path` under a header line
/// "## <job name> (<job id>) · run <run id> · <finished, ISO UTC> · <status>".
/// A relative path is taken from `base_dir`; "~/" is the user's home.
/// Missing parent directories are created. One write with O_APPEND.
status deliver_to_file(const std::string& path, const std::string& base_dir,
                       const delivery_payload& p);

/// POSTs webhook_body(p) to `url`. A 2xx answer delivers. Transport
/// failures, timeouts, 408, 429 and 5xx are retried up to `s.attempts` in
/// all with doubling backoff; any other status, a URL the guard refuses, or
/// `stop` fails at once. The error names the last failure and the number of
/// attempts.
status deliver_to_webhook(http_client& http, const std::string& url,
                          const delivery_payload& p, const webhook_settings& s,
                          delivery_stop* stop);

/// The outcome of delivering one answer to all of a job's targets.
struct delivery_report {
  struct target_result {
    /// The target as written ("webhook:https://...").
    std::string target;
    bool ok = false;
    std::string error;
  };
  /// One entry per target, in the job's order.
  std::vector<target_result> targets;
  bool ok() const;
  /// The failed targets' "target: reason", joined with "; ".
  std::string error_text() const;
};

/// Delivers `p` to each of `targets` (strings as parse_delivery_target
/// reads them; "session" always holds). Unparseable targets are errors.
delivery_report deliver_all(http_client& http,
                            const std::vector<std::string>& targets,
                            const std::string& base_dir,
                            const delivery_payload& p,
                            const webhook_settings& s, delivery_stop* stop);

} // namespace mibyan
