#include "cron/job.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

#include "cron/prompt_scan.hpp"

namespace mibyan {

namespace {

const char* const all_statuses[] = {
  cron_run_status::running,     cron_run_status::ok,
  cron_run_status::silent,      cron_run_status::error,
  cron_run_status::unreachable, cron_run_status::failed,
  cron_run_status::skipped,     cron_run_status::delivery_failed,
  cron_run_status::interrupted};

std::string random_id(const char* prefix) {
  thread_local std::mt19937_64 rng{[] {
    std::random_device rd;
    return (uint64_t{rd()} << 32) ^ rd();
  }()};
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx",
                static_cast<unsigned long long>(rng()));
  return std::string{prefix} + buf;
}

bool valid_utf8(std::string_view s) { return json::sanitize_utf8(s) == s; }

std::string check_text(const char* field, const std::string& s, size_t max,
                       bool allow_newlines) {
  if (s.size() > max)
    return std::string{field} + ": longer than " + std::to_string(max)
           + " bytes";
  if (!valid_utf8(s))
    return std::string{field} + ": not valid UTF-8";
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && !(allow_newlines && (c == '\n' || c == '\t'
                                          || c == '\r')))
        || u == 0x7f)
      return std::string{field} + ": contains a control character";
  }
  return {};
}

std::string check_list(const char* field, const std::vector<std::string>& xs) {
  if (xs.size() > cron_max_list_items)
    return std::string{field} + ": more than "
           + std::to_string(cron_max_list_items) + " items";
  for (size_t i = 0; i < xs.size(); ++i) {
    auto name = std::string{field} + "[" + std::to_string(i) + "]";
    if (xs[i].empty())
      return name + ": empty";
    if (auto e = check_text(name.c_str(), xs[i], cron_max_item_bytes, false);
        !e.empty())
      return e;
  }
  return {};
}

std::string check_deliver(const std::vector<std::string>& xs) {
  if (auto e = check_list("deliver", xs); !e.empty())
    return e;
  for (size_t i = 0; i < xs.size(); ++i) {
    const auto& d = xs[i];
    auto name = "deliver[" + std::to_string(i) + "]";
    if (d == "session" || d == "dashboard")
      continue;
    if (d.rfind("file:", 0) == 0) {
      auto path = d.substr(5);
      if (path.empty() || path[0] != '/')
        return name + ": a file target needs an absolute path (file:/PATH)";
      continue;
    }
    if (d.rfind("webhook:", 0) == 0) {
      auto url = d.substr(8);
      if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0)
        return name + ": a webhook target needs an http:// or https:// URL";
      if (url.size() <= 8 || url.find_first_of(" \t") != std::string::npos)
        return name + ": the webhook URL is malformed";
      continue;
    }
    return name + ": unknown target '" + json::sanitize_utf8(d)
           + "' (session, file:PATH, webhook:URL, dashboard)";
  }
  return {};
}

int64_t now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch())
    .count();
}

json::value string_list(const std::vector<std::string>& xs) {
  auto a = json::value::make_array();
  for (auto& x : xs)
    a.push_back(x);
  return a;
}

// -- strict reading --------------------------------------------------------

struct reader {
  const json::value& v;
  std::string error;

  bool str(const char* key, std::string& out) {
    auto* m = v.find(key);
    if (m == nullptr)
      return false;
    if (!m->is_string()) {
      error = std::string{key} + ": expected a string, got "
              + kind_name(m->type());
      return false;
    }
    out = m->as_string();
    return true;
  }
  bool list(const char* key, std::vector<std::string>& out,
            bool allow_string) {
    auto* m = v.find(key);
    if (m == nullptr)
      return false;
    if (allow_string && m->is_string()) {
      out = {m->as_string()};
      return true;
    }
    if (!m->is_array()) {
      error = std::string{key} + ": expected a list of strings, got "
              + kind_name(m->type());
      return false;
    }
    out.clear();
    for (auto& x : m->as_array()) {
      if (!x.is_string()) {
        error = std::string{key} + ": expected a list of strings, found "
                + kind_name(x.type());
        return false;
      }
      out.push_back(x.as_string());
    }
    return true;
  }
  bool integer(const char* key, int64_t& out) {
    auto* m = v.find(key);
    if (m == nullptr)
      return false;
    if (!m->is_int()) {
      error = std::string{key} + ": expected an integer, got "
              + kind_name(m->type());
      return false;
    }
    out = m->as_int();
    return true;
  }
  bool boolean(const char* key, bool& out) {
    auto* m = v.find(key);
    if (m == nullptr)
      return false;
    if (!m->is_bool()) {
      error = std::string{key} + ": expected true or false, got "
              + kind_name(m->type());
      return false;
    }
    out = m->as_bool();
    return true;
  }
};

const char* const definition_keys[] = {
  "name",     "schedule", "timezone", "prompt",   "script",
  "skills",   "cwd",      "toolsets", "model",    "provider",
  "deliver"};
const char* const provenance_keys[] = {"id", "created_by",
                                       "created_by_session", "created_ms",
                                       "updated_ms"};
const char* const state_keys[] = {
  "enabled",      "paused",         "pause_reason",
  "last_slot_ms", "last_run_ms",    "next_run_ms",
  "last_status",  "consecutive_failures", "retry_attempt",
  "retry_at_ms",  "running_run_id", "run_count"};

template <size_t N>
bool in(const char* const (&keys)[N], const std::string& k) {
  return std::any_of(std::begin(keys), std::end(keys),
                     [&](const char* x) { return k == x; });
}

// Reads the definition members present in `v` into `j`. "" on success.
std::string read_definition(const json::value& v, cron_job& j) {
  reader r{v, {}};
  r.str("name", j.name);
  r.str("schedule", j.schedule);
  r.str("timezone", j.timezone);
  r.str("prompt", j.prompt);
  r.str("script", j.script);
  r.list("skills", j.skills, false);
  r.str("cwd", j.cwd);
  r.list("toolsets", j.toolsets, false);
  r.str("model", j.model);
  r.str("provider", j.provider);
  r.list("deliver", j.deliver, true);
  return r.error;
}

std::string default_name(const cron_job& j) {
  if (j.prompt.empty())
    return "script";
  auto line = j.prompt.substr(0, j.prompt.find('\n'));
  // Cut at 60 bytes on a UTF-8 boundary.
  if (line.size() > 60) {
    size_t cut = 60;
    while (cut > 0 && (static_cast<unsigned char>(line[cut]) & 0xc0) == 0x80)
      --cut;
    line = line.substr(0, cut) + "...";
  }
  std::string out;
  for (char c : line)
    out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? ' ' : c;
  while (!out.empty() && out.back() == ' ')
    out.pop_back();
  return out.empty() ? "job" : out;
}

} // namespace

bool is_cron_run_status(std::string_view s) {
  return std::any_of(std::begin(all_statuses), std::end(all_statuses),
                     [&](const char* x) { return s == x; });
}

bool cron_status_is_success(std::string_view s) {
  return s == cron_run_status::ok || s == cron_run_status::silent;
}

bool cron_status_is_failure(std::string_view s) {
  return s == cron_run_status::error || s == cron_run_status::failed
         || s == cron_run_status::delivery_failed;
}

std::string cron_cap_text(std::string_view text, size_t max) {
  if (text.size() <= max)
    return std::string{text};
  size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xc0) == 0x80)
    --cut;
  return std::string{text.substr(0, cut)} + "\n[... "
         + std::to_string(text.size() - cut) + " bytes cut]";
}

std::string new_cron_job_id() { return random_id("job_"); }
std::string new_cron_run_id() { return random_id("run_"); }

result<cron_schedule> cron_job_schedule(const cron_job& j) {
  return cron_schedule::parse(j.schedule, j.timezone,
                              cron_time_from_ms(j.created_ms));
}

status validate_cron_job(const cron_job& j) {
  auto bad = [](const std::string& e) {
    return status::failure(status_code::invalid_argument, e);
  };
  if (auto e = check_cron_job_id(j.id).error; !e.empty())
    return bad("id: " + e);
  if (j.name.empty())
    return bad("name: empty");
  if (auto e = check_text("name", j.name, cron_max_name_bytes, false);
      !e.empty())
    return bad(e);
  if (j.prompt.empty() == j.script.empty())
    return bad(j.prompt.empty()
                 ? "a job needs a prompt or a script"
                 : "a job has a prompt or a script, not both");
  if (auto e = check_text("prompt", j.prompt, cron_max_prompt_bytes, true);
      !e.empty())
    return bad(e);
  if (auto e = check_text("script", j.script, cron_max_script_bytes, true);
      !e.empty())
    return bad(e);
  if (!j.prompt.empty())
    if (auto st = check_prompt_text(j.prompt, "the job's prompt"); !st)
      return st;
  if (auto e = check_list("skills", j.skills); !e.empty())
    return bad(e);
  if (auto e = check_list("toolsets", j.toolsets); !e.empty())
    return bad(e);
  if (!j.cwd.empty() && j.cwd[0] != '/')
    return bad("cwd: an absolute path is needed");
  if (auto e = check_text("cwd", j.cwd, 4096, false); !e.empty())
    return bad(e);
  if (auto e = check_text("model", j.model, 256, false); !e.empty())
    return bad(e);
  if (auto e = check_text("provider", j.provider, 256, false); !e.empty())
    return bad(e);
  if (auto e = check_deliver(j.deliver); !e.empty())
    return bad(e);
  if (j.created_by != "user" && j.created_by != "agent")
    return bad("created_by: expected user or agent, got '"
               + json::sanitize_utf8(j.created_by) + "'");
  if (auto e = check_text("created_by_session", j.created_by_session, 256,
                          false);
      !e.empty())
    return bad(e);
  if (j.timezone.empty())
    return bad("timezone: empty (an IANA name such as Europe/Berlin)");
  auto s = cron_job_schedule(j);
  if (!s)
    return s.get_status();
  return {};
}

json::value cron_job_to_json(const cron_job& j, cron_json_parts parts) {
  auto o = json::value::make_object();
  o.set("id", j.id);
  o.set("name", j.name);
  o.set("schedule", j.schedule);
  o.set("timezone", j.timezone);
  if (auto s = cron_job_schedule(j))
    o.set("schedule_description", s->describe());
  if (!j.script.empty())
    o.set("script", j.script);
  else
    o.set("prompt", j.prompt);
  o.set("skills", string_list(j.skills));
  o.set("cwd", j.cwd);
  o.set("toolsets", string_list(j.toolsets));
  o.set("model", j.model);
  o.set("provider", j.provider);
  o.set("deliver", string_list(j.deliver));
  o.set("created_by", j.created_by);
  o.set("created_by_session", j.created_by_session);
  o.set("created_ms", j.created_ms);
  o.set("updated_ms", j.updated_ms);
  if (parts == cron_json_parts::all) {
    o.set("enabled", j.enabled);
    o.set("paused", j.paused);
    o.set("pause_reason", j.pause_reason);
    o.set("last_slot_ms", j.last_slot_ms);
    o.set("last_run_ms", j.last_run_ms);
    o.set("next_run_ms", j.next_run_ms);
    o.set("last_status", j.last_status);
    o.set("consecutive_failures", j.consecutive_failures);
    o.set("retry_attempt", j.retry_attempt);
    o.set("retry_at_ms", j.retry_at_ms);
    o.set("running_run_id", j.running_run_id);
    o.set("run_count", j.run_count);
  }
  return o;
}

result<cron_job> cron_job_from_json(const json::value& v,
                                    const std::string& default_zone,
                                    bool allow_state) {
  using R = result<cron_job>;
  auto bad = [](const std::string& e) {
    return R::failure(status_code::invalid_argument, e);
  };
  if (!v.is_object())
    return bad(std::string{"a job is a JSON object, got "}
               + kind_name(v.type()));
  for (auto& [k, _] : v.as_object()) {
    if (in(definition_keys, k) || k == "schedule_description")
      continue;
    if (in(provenance_keys, k) || in(state_keys, k)) {
      if (allow_state)
        continue;
      return bad(k + ": set by the scheduler, not accepted here");
    }
    return bad("unknown member '" + json::sanitize_utf8(k) + "'");
  }
  cron_job j;
  j.created_by = "user";
  if (auto e = read_definition(v, j); !e.empty())
    return bad(e);
  if (allow_state) {
    reader r{v, {}};
    r.str("id", j.id);
    r.str("created_by", j.created_by);
    r.str("created_by_session", j.created_by_session);
    r.integer("created_ms", j.created_ms);
    r.integer("updated_ms", j.updated_ms);
    r.boolean("enabled", j.enabled);
    r.boolean("paused", j.paused);
    r.str("pause_reason", j.pause_reason);
    r.integer("last_slot_ms", j.last_slot_ms);
    r.integer("last_run_ms", j.last_run_ms);
    r.integer("next_run_ms", j.next_run_ms);
    r.str("last_status", j.last_status);
    r.integer("consecutive_failures", j.consecutive_failures);
    r.integer("retry_attempt", j.retry_attempt);
    r.integer("retry_at_ms", j.retry_at_ms);
    r.str("running_run_id", j.running_run_id);
    r.integer("run_count", j.run_count);
    if (!r.error.empty())
      return bad(r.error);
    if (!j.last_status.empty() && !is_cron_run_status(j.last_status))
      return bad("last_status: unknown status '"
                 + json::sanitize_utf8(j.last_status) + "'");
  }
  if (j.schedule.empty())
    return bad("schedule: missing (e.g. 'in 30m', 'every 2h', "
               "'0 9 * * 1-5' or '2026-12-24T09:00')");
  if (j.prompt.empty() && j.script.empty())
    return bad("a job needs a prompt or a script");
  if (j.timezone.empty())
    j.timezone = default_zone.empty() ? cron_local_zone_name() : default_zone;
  if (auto st = cron_check_zone(j.timezone); !st)
    return bad("timezone: " + st.error);
  if (j.name.empty())
    j.name = default_name(j);
  if (j.deliver.empty() && v.find("deliver") == nullptr)
    j.deliver = {"session"};
  if (!j.id.empty() && j.created_ms != 0) {
    if (auto st = validate_cron_job(j); !st)
      return R{st};
    return R{std::move(j)};
  }
  // Not yet an id or a creation time: check everything else with
  // placeholders.
  cron_job probe = j;
  if (probe.id.empty())
    probe.id = "job_probe";
  if (probe.created_ms == 0)
    probe.created_ms = now_ms();
  if (auto st = validate_cron_job(probe); !st)
    return R{st};
  return R{std::move(j)};
}

status cron_job_patch(cron_job& j, const json::value& patch) {
  auto bad = [](const std::string& e) {
    return status::failure(status_code::invalid_argument, e);
  };
  if (!patch.is_object())
    return bad(std::string{"an update is a JSON object, got "}
               + kind_name(patch.type()));
  for (auto& [k, _] : patch.as_object()) {
    if (in(definition_keys, k))
      continue;
    if (in(provenance_keys, k) || in(state_keys, k))
      return bad(k + ": cannot be changed by an update");
    return bad("unknown member '" + json::sanitize_utf8(k) + "'");
  }
  cron_job next = j;
  if (auto e = read_definition(patch, next); !e.empty())
    return bad(e);
  // Setting one of prompt/script clears the other.
  if (patch.find("prompt") != nullptr && patch.find("script") == nullptr
      && !next.prompt.empty())
    next.script.clear();
  if (patch.find("script") != nullptr && patch.find("prompt") == nullptr
      && !next.script.empty())
    next.prompt.clear();
  if (auto st = validate_cron_job(next); !st)
    return st;
  j = std::move(next);
  return {};
}

json::value cron_run_to_json(const cron_run& r) {
  auto o = json::value::make_object();
  o.set("id", r.id);
  o.set("job_id", r.job_id);
  o.set("session_id", r.session_id);
  o.set("scheduled_for_ms", r.scheduled_for_ms);
  o.set("started_ms", r.started_ms);
  o.set("ended_ms", r.ended_ms);
  o.set("status", r.status);
  o.set("trigger", r.trigger);
  o.set("attempt", r.attempt);
  o.set("result", r.result);
  o.set("error", r.error);
  if (!r.delivery_json.empty()) {
    auto d = json::parse(r.delivery_json);
    if (d)
      o.set("delivery", std::move(*d.v));
    else
      o.set("delivery", r.delivery_json);
  }
  return o;
}

} // namespace mibyan
