#include "storage/cron_record.hpp"

#include <cctype>

#include "storage/byte_codec.hpp"

namespace mibyan {

namespace {

constexpr char job_format_v1 = 1;
constexpr char run_format_v1 = 1;
constexpr size_t max_cron_id_bytes = 64;
constexpr size_t max_list_items = 4096;

void put_list(std::string& out, const std::vector<std::string>& xs) {
  codec::put_varint(out, xs.size());
  for (auto& x : xs)
    codec::put_bytes(out, x);
}

bool get_list(std::string_view& in, std::vector<std::string>& xs) {
  uint64_t n = 0;
  if (!codec::get_varint(in, n) || n > max_list_items || n > in.size())
    return false;
  xs.clear();
  xs.reserve(n);
  for (uint64_t i = 0; i < n; ++i) {
    std::string s;
    if (!codec::get_string(in, s))
      return false;
    xs.push_back(std::move(s));
  }
  return true;
}

bool get_bool(std::string_view& in, bool& b) {
  uint64_t x = 0;
  if (!codec::get_varint(in, x) || x > 1)
    return false;
  b = x == 1;
  return true;
}

std::string check_id(std::string_view id, const char* what) {
  if (id.empty())
    return std::string{"a "} + what + " id is empty";
  if (id.size() > max_cron_id_bytes)
    return std::string{"a "} + what + " id has at most "
           + std::to_string(max_cron_id_bytes) + " bytes";
  for (char c : id)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_'
          || c == '-'))
      return std::string{"a "} + what
             + " id may only contain letters, digits, _ and -";
  return {};
}

} // namespace

std::string encode_cron_job(const cron_job_record& j) {
  std::string out;
  out.reserve(128 + j.prompt.size() + j.script.size());
  out.push_back(job_format_v1);
  codec::put_bytes(out, j.id);
  codec::put_bytes(out, j.name);
  codec::put_bytes(out, j.schedule);
  codec::put_bytes(out, j.timezone);
  codec::put_bytes(out, j.prompt);
  codec::put_bytes(out, j.script);
  put_list(out, j.skills);
  codec::put_bytes(out, j.cwd);
  put_list(out, j.toolsets);
  codec::put_bytes(out, j.model);
  codec::put_bytes(out, j.provider);
  put_list(out, j.deliver);
  codec::put_bytes(out, j.created_by);
  codec::put_bytes(out, j.created_by_session);
  codec::put_svarint(out, j.created_ms);
  codec::put_svarint(out, j.updated_ms);
  codec::put_varint(out, j.enabled ? 1 : 0);
  codec::put_varint(out, j.paused ? 1 : 0);
  codec::put_bytes(out, j.pause_reason);
  codec::put_svarint(out, j.last_slot_ms);
  codec::put_svarint(out, j.last_run_ms);
  codec::put_svarint(out, j.next_run_ms);
  codec::put_bytes(out, j.last_status);
  codec::put_svarint(out, j.consecutive_failures);
  codec::put_svarint(out, j.retry_attempt);
  codec::put_svarint(out, j.retry_at_ms);
  codec::put_bytes(out, j.running_run_id);
  codec::put_svarint(out, j.run_count);
  return out;
}

bool decode_cron_job(std::string_view in, cron_job_record& j) {
  if (!codec::get_format(in, job_format_v1))
    return false;
  bool ok = codec::get_string(in, j.id) && codec::get_string(in, j.name)
            && codec::get_string(in, j.schedule)
            && codec::get_string(in, j.timezone)
            && codec::get_string(in, j.prompt)
            && codec::get_string(in, j.script) && get_list(in, j.skills)
            && codec::get_string(in, j.cwd) && get_list(in, j.toolsets)
            && codec::get_string(in, j.model)
            && codec::get_string(in, j.provider) && get_list(in, j.deliver)
            && codec::get_string(in, j.created_by)
            && codec::get_string(in, j.created_by_session)
            && codec::get_svarint(in, j.created_ms)
            && codec::get_svarint(in, j.updated_ms)
            && get_bool(in, j.enabled) && get_bool(in, j.paused)
            && codec::get_string(in, j.pause_reason)
            && codec::get_svarint(in, j.last_slot_ms)
            && codec::get_svarint(in, j.last_run_ms)
            && codec::get_svarint(in, j.next_run_ms)
            && codec::get_string(in, j.last_status)
            && codec::get_svarint(in, j.consecutive_failures)
            && codec::get_svarint(in, j.retry_attempt)
            && codec::get_svarint(in, j.retry_at_ms)
            && codec::get_string(in, j.running_run_id)
            && codec::get_svarint(in, j.run_count);
  return ok && in.empty();
}

std::string encode_cron_run(const cron_run_record& r) {
  std::string out;
  out.reserve(96 + r.result.size() + r.error.size());
  out.push_back(run_format_v1);
  codec::put_bytes(out, r.id);
  codec::put_bytes(out, r.job_id);
  codec::put_bytes(out, r.session_id);
  codec::put_svarint(out, r.scheduled_for_ms);
  codec::put_svarint(out, r.started_ms);
  codec::put_svarint(out, r.ended_ms);
  codec::put_bytes(out, r.status);
  codec::put_bytes(out, r.trigger);
  codec::put_svarint(out, r.attempt);
  codec::put_bytes(out, r.result);
  codec::put_bytes(out, r.error);
  codec::put_bytes(out, r.delivery_json);
  return out;
}

bool decode_cron_run(std::string_view in, cron_run_record& r) {
  if (!codec::get_format(in, run_format_v1))
    return false;
  bool ok = codec::get_string(in, r.id) && codec::get_string(in, r.job_id)
            && codec::get_string(in, r.session_id)
            && codec::get_svarint(in, r.scheduled_for_ms)
            && codec::get_svarint(in, r.started_ms)
            && codec::get_svarint(in, r.ended_ms)
            && codec::get_string(in, r.status)
            && codec::get_string(in, r.trigger)
            && codec::get_svarint(in, r.attempt)
            && codec::get_string(in, r.result)
            && codec::get_string(in, r.error)
            && codec::get_string(in, r.delivery_json);
  return ok && in.empty();
}

status check_cron_job_id(std::string_view id) {
  auto why = check_id(id, "job");
  return why.empty() ? status{}
                     : status::failure(status_code::invalid_argument, why);
}

status check_cron_run_id(std::string_view id) {
  auto why = check_id(id, "run");
  return why.empty() ? status{}
                     : status::failure(status_code::invalid_argument, why);
}

void cron_changes::append(cron_changes other) {
  for (auto& j : other.jobs)
    jobs.push_back(std::move(j));
  for (auto& r : other.runs)
    runs.push_back(std::move(r));
  for (auto& d : other.deleted_jobs)
    deleted_jobs.push_back(std::move(d));
}

} // namespace mibyan
