// File: cron/schedule.hpp
//
// A job's schedule (docs/cron.md, "Schedules and time zones"): parsed from
// its text into a value that answers "when next, strictly after t".
//
// Forms:
//   in 30m | in 2h | in 45s | in 1d | in 1h30m   one shot, after the anchor
//   every 15m | every 2h | every 1d              interval (>= 1 minute)
//   0 9 * * 1-5 | */10 8-18 * JAN-JUN MON,FRI    five-field cron
//   @hourly @daily @midnight @weekly @monthly @yearly @annually
//   2026-12-24T09:00[:SS][Z|+HH:MM|+HHMM]        one shot at an ISO 8601 time
// Units: s/sec/second(s), m/min/minute(s), h/hr/hour(s), d/day(s),
// w/week(s); several may follow each other ("1h30m").
//
// Time zone: every schedule has an IANA zone (validated against the
// system's tz database through Howard Hinnant's date/tz, which reads
// /usr/share/zoneinfo). Cron fields and ISO times without an offset are
// wall-clock times in that zone; `in` and `every` are absolute durations.
//
// The anchor is the job's creation time: `in D` fires once at anchor + D,
// `every I` at anchor + k*I (k >= 1), so the slots of a job never drift
// and are the same after a restart.
//
// Daylight saving (cron and zone-local ISO times): a local time that does
// not exist (spring forward) fires once at the first valid instant after
// the gap (02:30 on the day clocks jump 02:00 -> 03:00 fires at 03:00); a
// local time that occurs twice (fall back) fires once, at its first
// occurrence. Several slots that map to one instant fire once.
//
// Cron rules: minute 0-59, hour 0-23, day of month 1-31, month 1-12 or
// JAN-DEC, day of week 0-7 (0 and 7 Sunday) or SUN-SAT; `*`, lists (a,b),
// ranges (a-b), steps (*/n, a-b/n, a/n = a-max/n). When both day of month
// and day of week are restricted (neither starts with `*`), a day matches
// if EITHER matches (the usual cron OR rule); otherwise both must.
//
// Thread safety: a schedule is an immutable value; any thread. Nothing
// throws (the tz library's exceptions are caught inside).
#pragma once

#include <bitset>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.hpp"

namespace date {
class time_zone;
}

namespace mibyan {

/// Milliseconds since the Unix epoch, on the system clock.
using cron_time =
  std::chrono::time_point<std::chrono::system_clock, std::chrono::milliseconds>;

inline cron_time cron_time_from_ms(int64_t ms) {
  return cron_time{std::chrono::milliseconds{ms}};
}
inline int64_t cron_ms(cron_time t) { return t.time_since_epoch().count(); }

/// The IANA name of the node's local zone (date::current_zone(), which
/// follows /etc/localtime or $TZ); "UTC" when it cannot be determined.
std::string cron_local_zone_name();

/// Checks that `name` is a zone of the tz database. Errors:
/// invalid_argument "unknown time zone 'X' (an IANA name such as
/// Europe/Berlin)".
status cron_check_zone(std::string_view name);

class cron_schedule {
public:
  enum class kind : uint8_t { once_in, every, cron, once_at };

  /// Parses `text` in zone `zone` ("" = cron_local_zone_name()), anchored
  /// at `anchor` (the job's creation time). Errors (invalid_argument),
  /// e.g. "schedule '0 25 * * *': hour: 25 is out of range 0-23", "unknown
  /// time zone 'Mars/Base'", "schedule '0 0 31 2 *' never fires".
  static result<cron_schedule> parse(std::string_view text,
                                     std::string_view zone, cron_time anchor);

  /// The next fire time strictly after `t`; none for a spent one-shot (and
  /// never for the other forms).
  std::optional<cron_time> next_after(cron_time t) const;

  /// Words for listings: "once at 2026-12-24 09:00 Europe/Berlin",
  /// "every 2 hours", "at 09:00 on Monday through Friday
  /// (America/New_York)".
  std::string describe() const;

  kind what() const { return kind_; }
  bool one_shot() const {
    return kind_ == kind::once_in || kind_ == kind::once_at;
  }
  const std::string& text() const { return text_; }
  /// The zone's IANA name (as the tz database spells it).
  const std::string& zone_name() const;
  cron_time anchor() const { return anchor_; }
  /// `in` and `every`: the duration.
  std::chrono::milliseconds interval() const { return interval_; }

private:
  cron_schedule() = default;
  std::optional<cron_time> next_cron(cron_time t) const;
  bool day_matches(int mday, int month, int wday) const;

  kind kind_ = kind::every;
  std::string text_;
  const date::time_zone* zone_ = nullptr;
  cron_time anchor_{};
  std::chrono::milliseconds interval_{0};
  /// once_at: the instant.
  cron_time at_{};
  // cron: the sets (bit n = value n).
  std::bitset<60> minutes_;
  std::bitset<24> hours_;
  std::bitset<32> mdays_;
  std::bitset<13> months_;
  std::bitset<7> wdays_;
  bool mday_star_ = true;
  bool wday_star_ = true;
};

} // namespace mibyan
