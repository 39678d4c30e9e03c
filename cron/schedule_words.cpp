// A job's schedule in words (cron_schedule::describe, cron/schedule.hpp):
// "every 2 hours", "at 09:00 on Monday through Friday (Europe/Berlin)".
// Pure; any thread; nothing throws (a time the tz library cannot format is
// shown in milliseconds).
#include "cron/schedule.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <exception>
#include <vector>

#include <date/date.h>
#include <date/tz.h>

#include "base/strings.hpp"
#include "cron/schedule_fields.hpp"

namespace mibyan {

namespace {

using namespace std::chrono;
using namespace cron_fields;

const char* const day_words[] = {"Sunday",   "Monday", "Tuesday",
                                 "Wednesday", "Thursday", "Friday",
                                 "Saturday"};
const char* const month_words[] = {"January", "February", "March",
                                   "April",   "May",      "June",
                                   "July",    "August",   "September",
                                   "October", "November", "December"};

std::string duration_words(int64_t ms) {
  struct unit {
    int64_t ms;
    const char* one;
    const char* many;
  };
  static const unit units[] = {{7 * ms_per_d, "week", "weeks"},
                               {ms_per_d, "day", "days"},
                               {ms_per_h, "hour", "hours"},
                               {ms_per_m, "minute", "minutes"},
                               {ms_per_s, "second", "seconds"}};
  std::string out;
  for (auto& u : units) {
    if (ms < u.ms)
      continue;
    int64_t n = ms / u.ms;
    ms %= u.ms;
    if (!out.empty())
      out += ' ';
    out += std::to_string(n) + ' ' + (n == 1 ? u.one : u.many);
  }
  return out.empty() ? "0 seconds" : out;
}

// The field's text with day or month numbers written as names
// ("1-5" -> "Monday through Friday" for single ranges).
std::string field_words(std::string_view field, const char* const* words,
                        const char* const* names, int base, int count,
                        int wrap_at) {
  std::string out;
  size_t i = 0;
  std::string item;
  auto word = [&](std::string_view tok) -> std::string {
    if (tok.empty())
      return std::string{tok};
    if (!std::isdigit(static_cast<unsigned char>(tok[0]))) {
      auto u = strings::upper(tok);
      for (int i = 0; i < count; ++i)
        if (u == names[i])
          return words[i];
      return std::string{tok};
    }
    int v = std::atoi(std::string{tok}.c_str());
    if (v == wrap_at)
      v = base;
    if (v < base || v >= base + count)
      return std::string{tok};
    return words[v - base];
  };
  while (i <= field.size()) {
    size_t comma = field.find(',', i);
    auto it = field.substr(i, comma == std::string_view::npos
                                ? std::string_view::npos
                                : comma - i);
    std::string part;
    auto slash = it.find('/');
    auto range = it.substr(0, slash);
    auto dash = range.find('-');
    if (range == "*")
      part = "every";
    else if (dash == std::string_view::npos)
      part = word(range);
    else
      part = word(range.substr(0, dash)) + " through "
             + word(range.substr(dash + 1));
    if (slash != std::string_view::npos)
      part += " (every " + std::string{it.substr(slash + 1)} + ")";
    if (!out.empty())
      out += ", ";
    out += part;
    if (comma == std::string_view::npos)
      break;
    i = comma + 1;
  }
  return out;
}

std::string format_local(const date::time_zone* z, cron_time t) {
  try {
    auto zt = date::make_zoned(z, std::chrono::floor<seconds>(t));
    return date::format("%Y-%m-%d %H:%M", zt.get_local_time());
  } catch (const std::exception&) {
    return std::to_string(cron_ms(t)) + " ms";
  }
}

} // namespace

std::string cron_schedule::describe() const {
  const std::string& zone_name_ = zone_name();
  switch (kind_) {
    case kind::once_in:
      return "once, " + duration_words(interval_.count())
             + " after it was created (" + format_local(zone_, anchor_
                                                        + interval_)
             + " " + zone_name_ + ")";
    case kind::once_at:
      return "once at " + format_local(zone_, at_) + " (" + zone_name_ + ")";
    case kind::every:
      return "every " + duration_words(interval_.count());
    case kind::cron:
      break;
  }
  // The fields as written (an alias stands for its expression).
  std::string expr = text_;
  if (!expr.empty() && expr[0] == '@')
    if (auto* e = alias_expr(strings::lower(expr)))
      expr = e;
  auto fields_ = split_ws(expr);
  if (fields_.size() != 5)
    return text_;
  std::string out;
  const auto& mi = fields_[0];
  const auto& hr = fields_[1];
  auto plain = [](const std::string& f) {
    return !f.empty()
           && std::all_of(f.begin(), f.end(), [](char c) {
                return std::isdigit(static_cast<unsigned char>(c));
              });
  };
  auto two = [](const std::string& f) {
    return f.size() == 1 ? "0" + f : f;
  };
  if (plain(mi) && plain(hr))
    out = "at " + two(hr) + ":" + two(mi);
  else if (plain(mi) && hr == "*")
    out = "at minute " + mi + " of every hour";
  else if (mi == "*" && hr == "*")
    out = "every minute";
  else
    out = "at minute " + (mi == "*" ? std::string{"every"} : mi)
          + " past hour " + (hr == "*" ? std::string{"every"} : hr);
  const auto& dom = fields_[2];
  const auto& dow = fields_[4];
  auto dow_words = field_words(dow, day_words, day_names, 0, 7, 7);
  if (!mday_star_ && !wday_star_)
    out += " on day " + dom + " of the month or on " + dow_words;
  else if (dom == "*" && dow == "*")
    out += ", every day";
  else if (dom == "*")
    out += " on " + dow_words;
  else if (dow == "*")
    out += " on day " + dom + " of the month";
  else
    out += " on day " + dom + " of the month and on " + dow_words;
  if (fields_[3] != "*")
    out += " in " + field_words(fields_[3], month_words, month_names, 1, 12, -1);
  out += " (" + zone_name_ + ")";
  return out;
}

} // namespace mibyan
