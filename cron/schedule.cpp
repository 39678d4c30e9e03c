// Parsing a job's schedule and finding its next time (cron/schedule.hpp).
// Its description in words is in cron/schedule_words.cpp.
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

namespace cron_fields {

const char* const month_names[12] = {"JAN", "FEB", "MAR", "APR",
                                     "MAY", "JUN", "JUL", "AUG",
                                     "SEP", "OCT", "NOV", "DEC"};
const char* const day_names[7] = {"SUN", "MON", "TUE", "WED",
                                  "THU", "FRI", "SAT"};

std::vector<std::string> split_ws(std::string_view s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i])))
      ++i;
    size_t b = i;
    while (i < s.size() && !std::isspace(static_cast<unsigned char>(s[i])))
      ++i;
    if (i > b)
      out.emplace_back(s.substr(b, i - b));
  }
  return out;
}

const char* alias_expr(std::string_view low) {
  static const std::pair<const char*, const char*> aliases[] = {
    {"@yearly", "0 0 1 1 *"}, {"@annually", "0 0 1 1 *"},
    {"@monthly", "0 0 1 * *"}, {"@weekly", "0 0 * * 0"},
    {"@daily", "0 0 * * *"},   {"@midnight", "0 0 * * *"},
    {"@hourly", "0 * * * *"}};
  for (auto& [a, e] : aliases)
    if (low == a)
      return e;
  return nullptr;
}

} // namespace cron_fields

namespace {

using namespace cron_fields;
using namespace std::chrono;
using date::sys_seconds;

/// Days searched for the next match of a cron expression (covers a
/// February 29th in any eight-year span).
constexpr int max_search_days = 366 * 9;

const date::time_zone* find_zone(std::string_view name, std::string& error) {
  if (name.empty() || name.size() > 128) {
    error = "unknown time zone '" + std::string{name}
            + "' (an IANA name such as Europe/Berlin)";
    return nullptr;
  }
  try {
    return date::locate_zone(std::string{name});
  } catch (const std::exception&) {
    error = "unknown time zone '" + std::string{name}
            + "' (an IANA name such as Europe/Berlin)";
    return nullptr;
  }
}

// "30m", "1h30m", "2 hours", "1h 30m" -> milliseconds; "" on success.
std::string parse_duration(std::string_view text, int64_t& ms) {
  ms = 0;
  size_t i = 0;
  int parts = 0;
  auto skip_ws = [&] {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i])))
      ++i;
  };
  skip_ws();
  if (i == text.size())
    return "a duration is missing (e.g. 30m, 2h, 1d)";
  while (i < text.size()) {
    size_t b = i;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])))
      ++i;
    if (i == b)
      return "expected a number at '" + std::string{text.substr(b)} + "'";
    if (i - b > 9)
      return "the number " + std::string{text.substr(b, i - b)}
             + " is too large";
    int64_t n = std::atoll(std::string{text.substr(b, i - b)}.c_str());
    skip_ws();
    size_t u = i;
    while (i < text.size() && std::isalpha(static_cast<unsigned char>(text[i])))
      ++i;
    auto unit = strings::lower(text.substr(u, i - u));
    int64_t scale = 0;
    if (unit == "s" || unit == "sec" || unit == "secs" || unit == "second"
        || unit == "seconds")
      scale = ms_per_s;
    else if (unit == "m" || unit == "min" || unit == "mins"
             || unit == "minute" || unit == "minutes")
      scale = ms_per_m;
    else if (unit == "h" || unit == "hr" || unit == "hrs" || unit == "hour"
             || unit == "hours")
      scale = ms_per_h;
    else if (unit == "d" || unit == "day" || unit == "days")
      scale = ms_per_d;
    else if (unit == "w" || unit == "week" || unit == "weeks")
      scale = 7 * ms_per_d;
    else if (unit.empty())
      return "the number " + std::to_string(n)
             + " needs a unit (s, m, h, d or w)";
    else
      return "unknown unit '" + unit + "' (s, m, h, d or w)";
    ms += n * scale;
    if (ms > 3660 * ms_per_d)
      return "a duration is at most 10 years";
    ++parts;
    skip_ws();
  }
  if (ms <= 0)
    return "a duration must be positive";
  return {};
}

// One cron field: values lo..hi; `names` (optional) for JAN/SUN words.
// Sets `bits` (bit n = value n). "" on success.
std::string parse_field(std::string_view field, int lo, int hi,
                        const char* const* names, int names_base,
                        int name_count, std::vector<bool>& bits) {
  bits.assign(static_cast<size_t>(hi) + 1, false);
  auto value_of = [&](std::string_view tok, int& out) -> std::string {
    if (tok.empty())
      return "a value is missing";
    if (std::isdigit(static_cast<unsigned char>(tok[0]))) {
      for (char c : tok)
        if (!std::isdigit(static_cast<unsigned char>(c)))
          return "'" + std::string{tok} + "' is not a number";
      if (tok.size() > 4)
        return std::string{tok} + " is out of range " + std::to_string(lo)
               + "-" + std::to_string(hi);
      out = std::atoi(std::string{tok}.c_str());
      if (out < lo || out > hi)
        return std::string{tok} + " is out of range " + std::to_string(lo)
               + "-" + std::to_string(hi);
      return {};
    }
    if (names != nullptr) {
      auto u = strings::upper(tok);
      for (int i = 0; i < name_count; ++i)
        if (u == names[i]) {
          out = names_base + i;
          return {};
        }
    }
    return "'" + std::string{tok} + "' is not a number"
           + (names != nullptr ? std::string{" or a name"} : "");
  };
  if (field.empty())
    return "empty field";
  size_t start = 0;
  while (start <= field.size()) {
    size_t comma = field.find(',', start);
    auto item = field.substr(start, comma == std::string_view::npos
                                       ? std::string_view::npos
                                       : comma - start);
    if (item.empty())
      return "an empty list item";
    int step = 1;
    auto slash = item.find('/');
    std::string_view range = item;
    bool stepped = false;
    if (slash != std::string_view::npos) {
      auto st = item.substr(slash + 1);
      range = item.substr(0, slash);
      if (st.empty())
        return "a step is missing after '/'";
      for (char c : st)
        if (!std::isdigit(static_cast<unsigned char>(c)))
          return "step '" + std::string{st} + "' is not a number";
      if (st.size() > 4 || std::atoi(std::string{st}.c_str()) < 1
          || std::atoi(std::string{st}.c_str()) > hi)
        return "step " + std::string{st} + " is out of range 1-"
               + std::to_string(hi);
      step = std::atoi(std::string{st}.c_str());
      stepped = true;
    }
    int a = lo, b = hi;
    if (range == "*") {
    } else {
      auto dash = range.find('-');
      if (dash == std::string_view::npos) {
        if (auto e = value_of(range, a); !e.empty())
          return e;
        b = stepped ? hi : a;
      } else {
        if (auto e = value_of(range.substr(0, dash), a); !e.empty())
          return e;
        if (auto e = value_of(range.substr(dash + 1), b); !e.empty())
          return e;
        if (b < a)
          return "range " + std::string{range}
                 + " is backwards (write the smaller value first)";
      }
    }
    for (int v = a; v <= b; v += step)
      bits[static_cast<size_t>(v)] = true;
    if (comma == std::string_view::npos)
      break;
    start = comma + 1;
  }
  return {};
}

template <size_t N>
std::bitset<N> to_bits(const std::vector<bool>& v, int offset = 0) {
  std::bitset<N> b;
  for (size_t i = 0; i < v.size() && i + offset < N; ++i)
    if (v[i])
      b.set(i + offset);
  return b;
}

// ISO 8601: YYYY-MM-DDTHH:MM[:SS][Z|+HH:MM|+HHMM]. Sets local fields and
// the offset (has_offset false when none). "" on success.
struct iso_parts {
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
  bool has_offset = false;
  int offset_min = 0;
};

bool is_iso_like(std::string_view t) {
  return t.size() >= 10 && std::isdigit(static_cast<unsigned char>(t[0]))
         && std::isdigit(static_cast<unsigned char>(t[1]))
         && std::isdigit(static_cast<unsigned char>(t[2]))
         && std::isdigit(static_cast<unsigned char>(t[3])) && t[4] == '-';
}

std::string parse_iso(std::string_view t, iso_parts& p) {
  auto num = [&](size_t at, size_t len, int& out) {
    if (at + len > t.size())
      return false;
    out = 0;
    for (size_t i = at; i < at + len; ++i) {
      if (!std::isdigit(static_cast<unsigned char>(t[i])))
        return false;
      out = out * 10 + (t[i] - '0');
    }
    return true;
  };
  const std::string form =
    "expected an ISO 8601 time YYYY-MM-DDTHH:MM[:SS][Z|+HH:MM]";
  if (!num(0, 4, p.y) || t[4] != '-' || !num(5, 2, p.mo) || t.size() < 16
      || t[7] != '-' || !num(8, 2, p.d) || (t[10] != 'T' && t[10] != 't')
      || !num(11, 2, p.h) || t[13] != ':' || !num(14, 2, p.mi))
    return form;
  size_t i = 16;
  if (i < t.size() && t[i] == ':') {
    if (!num(i + 1, 2, p.s))
      return form;
    i += 3;
  }
  if (i < t.size()) {
    char c = t[i];
    if ((c == 'Z' || c == 'z') && i + 1 == t.size()) {
      p.has_offset = true;
    } else if (c == '+' || c == '-') {
      int oh = 0, om = 0;
      auto rest = t.size() - i - 1;
      if (rest == 5 && t[i + 3] == ':' && num(i + 1, 2, oh)
          && num(i + 4, 2, om)) {
      } else if (rest == 4 && num(i + 1, 2, oh) && num(i + 3, 2, om)) {
      } else if (rest == 2 && num(i + 1, 2, oh)) {
      } else {
        return form;
      }
      if (oh > 18 || om > 59)
        return "the offset " + std::string{t.substr(i)} + " is out of range";
      p.has_offset = true;
      p.offset_min = (oh * 60 + om) * (c == '-' ? -1 : 1);
    } else {
      return form;
    }
  }
  auto ymd = date::year{p.y} / date::month{static_cast<unsigned>(p.mo)}
             / date::day{static_cast<unsigned>(p.d)};
  if (!ymd.ok())
    return "the date " + std::string{t.substr(0, 10)} + " does not exist";
  if (p.h > 23 || p.mi > 59 || p.s > 59)
    return "the time " + std::string{t.substr(11, i - 11)}
           + " is out of range";
  return {};
}

// The instant a local time stands for: the first occurrence of a repeated
// one, the end of the gap for a skipped one.
sys_seconds resolve_local(const date::time_zone* z, date::local_seconds lt) {
  auto info = z->get_info(lt);
  switch (info.result) {
    case date::local_info::nonexistent:
      return info.second.begin;
    case date::local_info::ambiguous:
    case date::local_info::unique:
    default:
      return sys_seconds{lt.time_since_epoch() - info.first.offset};
  }
}

} // namespace

std::string cron_local_zone_name() {
  std::string error;
  if (const char* tz = std::getenv("TZ"); tz != nullptr && *tz != '\0') {
    std::string_view name{tz};
    if (name.front() == ':')
      name.remove_prefix(1);
    if (auto* z = find_zone(name, error))
      return z->name();
  }
  try {
    if (auto* z = date::current_zone())
      return z->name();
  } catch (const std::exception&) {
  }
  return "UTC";
}

status cron_check_zone(std::string_view name) {
  std::string error;
  if (find_zone(name, error) == nullptr)
    return status::failure(status_code::invalid_argument, error);
  return {};
}

result<cron_schedule> cron_schedule::parse(std::string_view text_in,
                                           std::string_view zone,
                                           cron_time anchor) {
  using R = result<cron_schedule>;
  auto text = strings::trim(text_in, strings::ascii_space);
  auto fail = [&](const std::string& why) {
    return R::failure(status_code::invalid_argument,
                      "schedule '" + text + "': " + why);
  };
  if (text.empty())
    return R::failure(status_code::invalid_argument,
                      "the schedule is empty (e.g. 'in 30m', 'every 2h', "
                      "'0 9 * * 1-5' or '2026-12-24T09:00')");
  if (text.size() > 256)
    return R::failure(status_code::invalid_argument,
                      "the schedule is longer than 256 bytes");
  cron_schedule s;
  s.text_ = text;
  s.anchor_ = anchor;
  std::string error;
  s.zone_ = find_zone(zone.empty() ? cron_local_zone_name()
                                   : std::string{zone},
                      error);
  if (s.zone_ == nullptr)
    return R::failure(status_code::invalid_argument, error);

  auto low = strings::lower(text);
  if (low.rfind("in ", 0) == 0 || low.rfind("every ", 0) == 0) {
    bool once = low[0] == 'i';
    int64_t ms = 0;
    if (auto e = parse_duration(std::string_view{text}.substr(once ? 3 : 6),
                                ms);
        !e.empty())
      return fail(e);
    if (!once && ms < ms_per_m)
      return fail("an interval is at least 1 minute");
    if (!once && ms > 366 * ms_per_d)
      return fail("an interval is at most 366 days");
    s.kind_ = once ? kind::once_in : kind::every;
    s.interval_ = milliseconds{ms};
    return R{std::move(s)};
  }
  if (is_iso_like(text)) {
    iso_parts p;
    if (auto e = parse_iso(text, p); !e.empty())
      return fail(e);
    auto ld = date::local_days{date::year{p.y}
                               / date::month{static_cast<unsigned>(p.mo)}
                               / date::day{static_cast<unsigned>(p.d)}};
    auto lt = date::local_seconds{ld.time_since_epoch()} + hours{p.h}
              + minutes{p.mi} + seconds{p.s};
    sys_seconds at;
    if (p.has_offset)
      at = sys_seconds{lt.time_since_epoch() - minutes{p.offset_min}};
    else
      at = resolve_local(s.zone_, lt);
    s.kind_ = kind::once_at;
    s.at_ = time_point_cast<milliseconds>(at);
    return R{std::move(s)};
  }
  // Cron, with the @ aliases.
  std::string expr = text;
  if (text[0] == '@') {
    auto* e = alias_expr(low);
    if (e == nullptr)
      return fail("unknown alias (@hourly, @daily, @midnight, @weekly, "
                  "@monthly, @yearly)");
    expr = e;
  }
  auto fields = split_ws(expr);
  if (fields.size() != 5)
    return fail("expected 'in DURATION', 'every DURATION', five cron fields "
                "(minute hour day-of-month month day-of-week) or an ISO "
                "8601 time; got " + std::to_string(fields.size())
                + (fields.size() == 1 ? " field" : " fields"));
  static const char* const field_names[] = {"minute", "hour", "day of month",
                                            "month", "day of week"};
  std::vector<bool> bits;
  std::string e;
  if (!(e = parse_field(fields[0], 0, 59, nullptr, 0, 0, bits)).empty())
    return fail(std::string{field_names[0]} + ": " + e);
  s.minutes_ = to_bits<60>(bits);
  if (!(e = parse_field(fields[1], 0, 23, nullptr, 0, 0, bits)).empty())
    return fail(std::string{field_names[1]} + ": " + e);
  s.hours_ = to_bits<24>(bits);
  if (!(e = parse_field(fields[2], 1, 31, nullptr, 0, 0, bits)).empty())
    return fail(std::string{field_names[2]} + ": " + e);
  s.mdays_ = to_bits<32>(bits);
  if (!(e = parse_field(fields[3], 1, 12, month_names, 1, 12, bits)).empty())
    return fail(std::string{field_names[3]} + ": " + e);
  s.months_ = to_bits<13>(bits);
  if (!(e = parse_field(fields[4], 0, 7, day_names, 0, 7, bits)).empty())
    return fail(std::string{field_names[4]} + ": " + e);
  s.wdays_.reset();
  for (size_t i = 0; i < bits.size(); ++i)
    if (bits[i])
      s.wdays_.set(i % 7);
  s.mday_star_ = fields[2][0] == '*';
  s.wday_star_ = fields[4][0] == '*';
  s.kind_ = kind::cron;
  if (!s.next_after(anchor))
    return fail("it never fires (no matching day within 9 years: check "
                "the day of month against the month)");
  return R{std::move(s)};
}

bool cron_schedule::day_matches(int mday, int month, int wday) const {
  if (!months_.test(static_cast<size_t>(month)))
    return false;
  bool dm = mdays_.test(static_cast<size_t>(mday));
  bool wm = wdays_.test(static_cast<size_t>(wday));
  if (!mday_star_ && !wday_star_)
    return dm || wm;
  return dm && wm;
}

std::optional<cron_time> cron_schedule::next_cron(cron_time t) const {
  try {
    auto ts = std::chrono::floor<seconds>(t);
    auto info = zone_->get_info(ts);
    auto local = date::local_seconds{ts.time_since_epoch() + info.offset};
    // Slots more than 3 hours before t's local time are before t whatever
    // the offsets of the day (they differ by at most 2 hours anywhere).
    auto earliest = local - hours{3};
    auto first_day = date::floor<date::days>(earliest);
    for (int i = 0; i <= max_search_days; ++i) {
      auto day = first_day + date::days{i};
      date::year_month_day ymd{day};
      date::weekday wd{day};
      if (!day_matches(static_cast<int>(static_cast<unsigned>(ymd.day())),
                       static_cast<int>(static_cast<unsigned>(ymd.month())),
                       static_cast<int>(wd.c_encoding())))
        continue;
      auto day_start = date::local_seconds{day.time_since_epoch()};
      for (int h = 0; h < 24; ++h) {
        if (!hours_.test(static_cast<size_t>(h)))
          continue;
        if (day_start + hours{h} + minutes{59} < earliest)
          continue;
        for (int m = 0; m < 60; ++m) {
          if (!minutes_.test(static_cast<size_t>(m)))
            continue;
          auto lt = day_start + hours{h} + minutes{m};
          if (lt < earliest)
            continue;
          auto at = time_point_cast<milliseconds>(resolve_local(zone_, lt));
          if (at > t)
            return cron_time{at.time_since_epoch()};
        }
      }
    }
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

std::optional<cron_time> cron_schedule::next_after(cron_time t) const {
  switch (kind_) {
    case kind::once_in: {
      auto at = anchor_ + interval_;
      if (at > t)
        return at;
      return std::nullopt;
    }
    case kind::once_at:
      if (at_ > t)
        return at_;
      return std::nullopt;
    case kind::every: {
      auto step = interval_.count();
      auto a = cron_ms(anchor_);
      auto x = cron_ms(t);
      // The smallest anchor + k*step > t (k >= 1 whenever t >= anchor;
      // a t before the anchor, after a clock correction, gets the grid's
      // slot after it).
      int64_t d = x - a;
      int64_t q = d / step;
      if (d < 0 && d % step != 0)
        --q;
      return cron_time_from_ms(a + (q + 1) * step);
    }
    case kind::cron:
      return next_cron(t);
  }
  return std::nullopt;
}

const std::string& cron_schedule::zone_name() const {
  static const std::string none;
  return zone_ != nullptr ? zone_->name() : none;
}

} // namespace mibyan
