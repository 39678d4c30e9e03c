// The job views the job interfaces share (tools/agent/cron_jobs.hpp).
#include "tools/agent/cron_jobs.hpp"

#include <chrono>
#include <ctime>

#include <date/tz.h>

#include "storage/session_store.hpp"

namespace mibyan {

json::value cron_job_view(const cron_job& j) {
  auto v = cron_job_to_json(j, cron_json_parts::all);
  auto sched = cron_job_schedule(j);
  v["schedule_description"]
    = sched ? sched->describe() : "invalid schedule: " + sched.error;
  return v;
}

std::string cron_local_time(int64_t ms, const std::string& zone) {
  if (ms <= 0)
    return "-";
  using namespace std::chrono;
  date::sys_time<milliseconds> tp{milliseconds{ms}};
  auto secs = floor<seconds>(tp);
  if (!zone.empty()) {
    try {
      auto* tz = date::locate_zone(zone);
      return date::format("%Y-%m-%d %H:%M:%S %Z",
                          date::make_zoned(tz, secs));
    } catch (const std::exception&) {
      // An unknown zone falls back to UTC below.
    }
  }
  std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

std::string cron_relative(int64_t ms, int64_t now_ms) {
  int64_t diff = (ms - now_ms) / 1000;
  bool past = diff < 0;
  int64_t v = past ? -diff : diff;
  int64_t d = v / 86400, h = (v % 86400) / 3600, m = (v % 3600) / 60,
          s = v % 60;
  std::string text;
  if (d > 0)
    text = std::to_string(d) + "d " + std::to_string(h) + "h";
  else if (h > 0)
    text = std::to_string(h) + "h " + std::to_string(m) + "m";
  else if (m > 0)
    text = std::to_string(m) + "m " + std::to_string(s) + "s";
  else
    text = std::to_string(s) + "s";
  return past ? text + " ago" : "in " + text;
}

std::string cron_next_run_text(const cron_job& j, int64_t now_ms) {
  if (j.paused)
    return "paused" + (j.pause_reason.empty() ? std::string{}
                                               : " (" + j.pause_reason + ")");
  if (!j.enabled)
    return "never (a one-shot that has run, or a disabled job)";
  int64_t next = j.retry_at_ms > 0
                     && (j.next_run_ms == 0 || j.retry_at_ms < j.next_run_ms)
                   ? j.retry_at_ms
                   : j.next_run_ms;
  if (next <= 0)
    return "not scheduled";
  auto text = cron_local_time(next, j.timezone) + " ("
              + cron_relative(next, now_ms) + ")";
  if (next == j.retry_at_ms && j.retry_at_ms > 0)
    text += ", a retry";
  return text;
}

bool is_cron_run_session(const session_store& store,
                         const std::string& session_id) {
  std::string id = session_id;
  // A delegated subagent's session and a compressed continuation point to
  // the session they came from.
  for (int depth = 0; depth < 32 && !id.empty(); ++depth) {
    auto s = store.get_session(id);
    if (!s) {
      // A subagent's session not stored yet: "<parent>::child::<n>".
      auto cut = id.find("::child::");
      if (cut == std::string::npos)
        return false;
      id = id.substr(0, cut);
      continue;
    }
    if (s->source == "cron")
      return true;
    if (!s->metadata_json.empty()) {
      auto meta = json::parse(s->metadata_json);
      if (meta && meta.v->is_object() && meta.v->find("cron_job_id") != nullptr)
        return true;
    }
    id = s->parent_session_id;
  }
  return false;
}

} // namespace mibyan
