// Delivery of a scheduled run's answer (runtime/cron_delivery.hpp,
// docs/cron.md "Running, approvals and delivery").
#include "runtime/cron_delivery.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>

#include <fcntl.h>
#include <unistd.h>

#include "base/http_client.hpp"
#include "base/json.hpp"
#include "base/utc_time.hpp"
#include "config/options.hpp"

namespace fs = std::filesystem;

namespace mibyan {

bool is_silent_answer(const std::string& answer) {
  auto b = answer.find_first_not_of(" \t\r\n");
  if (b == std::string::npos)
    return false;
  auto e = answer.find_last_not_of(" \t\r\n");
  return answer.compare(b, e - b + 1, cron_silent_answer) == 0;
}

result<delivery_target> parse_delivery_target(const std::string& text) {
  delivery_target t;
  if (text == "session") {
    t.type = delivery_target::kind::session;
    return t;
  }
  if (text == "dashboard") {
    t.type = delivery_target::kind::dashboard;
    return t;
  }
  if (text.rfind("file:", 0) == 0) {
    t.type = delivery_target::kind::file;
    t.value = text.substr(5);
    if (t.value.empty())
      return status::failure(status_code::invalid_argument,
                             "file: needs a path (file:PATH)");
    return t;
  }
  if (text.rfind("webhook:", 0) == 0) {
    t.type = delivery_target::kind::webhook;
    t.value = text.substr(8);
    auto valid = validate_url(t.value);
    if (!valid)
      return status::failure(status_code::invalid_argument,
                             "webhook: " + valid.error);
    return t;
  }
  return status::failure(status_code::invalid_argument,
                         "unknown delivery target '" + text
                           + "': use session, dashboard, file:PATH or "
                             "webhook:URL");
}

std::string webhook_body(const delivery_payload& p) {
  json::value v;
  v["job"]["id"] = p.job_id;
  v["job"]["name"] = p.job_name;
  v["run_id"] = p.run_id;
  v["status"] = p.status;
  v["answer"] = p.answer;
  v["session_id"] = p.session_id;
  v["scheduled_for"] = p.scheduled_for_ms > 0 ? json::value{iso_utc_from_ms(
                                                  p.scheduled_for_ms)}
                                              : json::value{};
  v["finished_at"] = iso_utc_from_ms(p.finished_at_ms);
  return v.dump();
}

void delivery_stop::stop() {
  {
    std::lock_guard<std::mutex> g{mtx_};
    stopped_ = true;
  }
  cv_.notify_all();
}

bool delivery_stop::stopped() const {
  std::lock_guard<std::mutex> g{mtx_};
  return stopped_;
}

bool delivery_stop::wait_for(std::chrono::milliseconds d) {
  std::unique_lock<std::mutex> g{mtx_};
  cv_.wait_for(g, d, [this] { return stopped_; });
  return !stopped_;
}

webhook_settings webhook_settings_of(const options& cfg) {
  webhook_settings s;
  s.policy.allow_private = cfg.security.allow_private_urls
                           || cfg.cron.allow_private_webhooks;
  s.policy.allowed_addresses = cfg.security.allowed_private_addresses;
  s.timeout = std::chrono::seconds(cfg.cron.webhook_timeout);
  s.attempts = static_cast<int>(cfg.cron.webhook_attempts);
  return s;
}

namespace {

std::string resolve_path(const std::string& path, const std::string& base) {
  if (path.rfind("~/", 0) == 0) {
    const char* home = std::getenv("HOME");
    return std::string{home ? home : ""} + path.substr(1);
  }
  if (!path.empty() && path[0] == '/')
    return path;
  return (fs::path(base.empty() ? "." : base) / path).string();
}

} // namespace

status deliver_to_file(const std::string& path, const std::string& base_dir,
                       const delivery_payload& p) {
  auto full = resolve_path(path, base_dir);
  std::error_code ec;
  auto parent = fs::path(full).parent_path();
  if (!parent.empty()) {
    fs::create_directories(parent, ec);
    if (ec)
      return status::failure(status_code::unavailable,
                             "cannot create " + parent.string() + ": "
                               + ec.message());
  }
  std::string text = "## " + p.job_name + " (" + p.job_id + ") · run "
                     + p.run_id + " · " + iso_utc_from_ms(p.finished_at_ms) + " · "
                     + p.status + "\n\n" + p.answer;
  if (text.empty() || text.back() != '\n')
    text += '\n';
  text += '\n';
  int fd = ::open(full.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
                  0600);
  if (fd < 0)
    return status::failure(errno == EACCES ? status_code::permission_denied
                                           : status_code::unavailable,
                           "cannot open " + full + ": "
                             + std::strerror(errno));
  // One write: a reader or another appender never sees half an entry.
  size_t done = 0;
  while (done < text.size()) {
    auto n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      auto err = std::string{std::strerror(errno)};
      ::close(fd);
      return status::failure(errno == ENOSPC ? status_code::resource_exhausted
                                             : status_code::unavailable,
                             "cannot write " + full + ": " + err);
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0)
    return status::failure(status_code::unavailable,
                           "cannot write " + full + ": "
                             + std::strerror(errno));
  return {};
}

namespace {

bool retryable_http_status(long s) {
  return s == 408 || s == 429 || s >= 500;
}

} // namespace

status deliver_to_webhook(http_client& http, const std::string& url,
                          const delivery_payload& p, const webhook_settings& s,
                          delivery_stop* stop) {
  auto valid = validate_url(url);
  if (!valid)
    return status::failure(status_code::invalid_argument, valid.error);
  if (auto allowed = s.policy.check_host(*valid); !allowed.ok())
    return status::failure(allowed.code,
                           allowed.error + " (cron.allow_private_webhooks or "
                                     "security.allow_private_urls allows it)");
  auto body = webhook_body(p);
  int attempts = std::max(1, s.attempts);
  auto backoff = s.backoff;
  std::string last;
  for (int attempt = 1; attempt <= attempts; ++attempt) {
    if (attempt > 1) {
      if (stop != nullptr && !stop->wait_for(backoff))
        return status::failure(status_code::cancelled,
                               last + " (stopped before attempt "
                                 + std::to_string(attempt) + ")");
      backoff *= 2;
    }
    http_request req;
    req.method = "POST";
    req.url = url;
    req.body = body;
    req.headers.emplace_back("Content-Type", "application/json");
    req.user_agent = "mibyan-cron";
    req.connect_timeout = s.timeout;
    req.total_timeout = s.timeout;
    req.follow_redirects = false;
    req.max_body_bytes = 64 * 1024;
    req.accept_compressed = false;
    if (!s.policy.allow_private) {
      auto policy = s.policy;
      req.connect_check = [policy](const std::string&, const std::string& ip) {
        return policy.check_address(ip);
      };
    }
    auto res = http.fetch(std::move(req));
    auto& sum = res.summary;
    if (sum.blocked)
      return status::failure(status_code::permission_denied,
                             sum.error + " (cron.allow_private_webhooks or "
                                         "security.allow_private_urls allows "
                                         "it)");
    if (sum.ok() && sum.status >= 200 && sum.status < 300)
      return {};
    bool again;
    if (!sum.ok() && !sum.capped) {
      last = sum.timed_out ? "no answer within "
                               + std::to_string(s.timeout.count()) + " ms"
                           : sum.error;
      again = !sum.cancelled;
    } else {
      last = "HTTP " + std::to_string(sum.status);
      again = retryable_http_status(sum.status);
    }
    if (!again)
      return status::failure(status_code::unavailable,
                             last + " (attempt " + std::to_string(attempt)
                               + ", not retried)");
  }
  return status::failure(status_code::unavailable,
                         last + " after " + std::to_string(attempts)
                           + (attempts == 1 ? " attempt" : " attempts"));
}

bool delivery_report::ok() const {
  for (auto& t : targets)
    if (!t.ok)
      return false;
  return true;
}

std::string delivery_report::error_text() const {
  std::string out;
  for (auto& t : targets)
    if (!t.ok)
      out += (out.empty() ? "" : "; ") + t.target + ": " + t.error;
  return out;
}

delivery_report deliver_all(http_client& http,
                            const std::vector<std::string>& targets,
                            const std::string& base_dir,
                            const delivery_payload& p,
                            const webhook_settings& s, delivery_stop* stop) {
  delivery_report r;
  for (auto& text : targets) {
    delivery_report::target_result one;
    one.target = text;
    auto t = parse_delivery_target(text);
    if (!t) {
      one.error = t.error;
      r.targets.push_back(std::move(one));
      continue;
    }
    status st;
    switch (t->type) {
    case delivery_target::kind::session:
    case delivery_target::kind::dashboard:
      // The session holds the answer; the console's jobs page reads the
      // run record.
      break;
    case delivery_target::kind::file:
      st = deliver_to_file(t->value, base_dir, p);
      break;
    case delivery_target::kind::webhook:
      st = deliver_to_webhook(http, t->value, p, s, stop);
      break;
    }
    one.ok = st.ok();
    one.error = st.error;
    r.targets.push_back(std::move(one));
  }
  return r;
}

} // namespace mibyan
