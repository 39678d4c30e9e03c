// cron/schedule: every schedule form, the DST rules in three zones (both
// hemispheres), and clear errors for bad schedules and zones. All times
// are computed from fixed instants: no clock is read.
#define BOOST_TEST_MODULE cron_schedule
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>

#include <date/date.h>
#include <date/tz.h>

#include "cron/schedule.hpp"

using namespace mibyan;
using namespace std::chrono;

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// A UTC instant written as "YYYY-MM-DD HH:MM".
cron_time utc(const char* text) {
  std::istringstream in{text};
  date::sys_time<minutes> t;
  in >> date::parse("%Y-%m-%d %H:%M", t);
  BOOST_REQUIRE_MESSAGE(!in.fail(), text);
  return time_point_cast<milliseconds>(t);
}

std::string show(cron_time t) {
  return date::format("%Y-%m-%d %H:%M", floor<minutes>(t));
}

// The local wall time of `t` in `zone`, "YYYY-MM-DD HH:MM".
std::string local(cron_time t, const char* zone) {
  auto zt = date::make_zoned(zone, floor<minutes>(t));
  return date::format("%Y-%m-%d %H:%M", zt.get_local_time());
}

cron_schedule parse_ok(const std::string& text, const std::string& zone,
                       cron_time anchor) {
  auto s = cron_schedule::parse(text, zone, anchor);
  BOOST_REQUIRE_MESSAGE(s.ok(), text + ": " + s.error);
  return *s;
}

// The next `n` fire times after `from`, as UTC text.
std::vector<std::string> fires(const cron_schedule& s, cron_time from,
                               int n) {
  std::vector<std::string> out;
  auto t = from;
  for (int i = 0; i < n; ++i) {
    auto x = s.next_after(t);
    if (!x)
      break;
    BOOST_REQUIRE(*x > t);
    out.push_back(show(*x));
    t = *x;
  }
  return out;
}

std::string parse_error(const std::string& text,
                        const std::string& zone = "UTC") {
  auto s = cron_schedule::parse(text, zone, utc("2026-01-01 00:00"));
  BOOST_REQUIRE_MESSAGE(!s.ok(), text + " parsed");
  BOOST_CHECK(s.code == status_code::invalid_argument);
  return s.error;
}

} // namespace

BOOST_AUTO_TEST_CASE(one_shot_delays_fire_once_after_the_anchor) {
  auto anchor = utc("2026-05-01 10:00");
  struct c {
    const char* text;
    const char* at;
  } cases[] = {{"in 30m", "2026-05-01 10:30"},
               {"in 2h", "2026-05-01 12:00"},
               {"in 1d", "2026-05-02 10:00"},
               {"in 1h30m", "2026-05-01 11:30"},
               {"in 90 minutes", "2026-05-01 11:30"},
               {"IN 1 Week", "2026-05-08 10:00"}};
  for (auto& x : cases) {
    auto s = parse_ok(x.text, "UTC", anchor);
    BOOST_CHECK(s.what() == cron_schedule::kind::once_in);
    BOOST_CHECK(s.one_shot());
    auto f = fires(s, anchor, 3);
    BOOST_REQUIRE_EQUAL(f.size(), 1u);
    BOOST_CHECK_EQUAL(f[0], x.at);
  }
  auto s45 = parse_ok("in 45s", "UTC", anchor);
  BOOST_CHECK(*s45.next_after(anchor) == anchor + seconds{45});
  // Spent once the time has passed, also exactly at it.
  BOOST_CHECK(!s45.next_after(anchor + seconds{45}));
  BOOST_CHECK(contains(parse_ok("in 30m", "UTC", anchor).describe(),
                       "30 minutes after it was created"));
}

BOOST_AUTO_TEST_CASE(intervals_are_absolute_and_anchored) {
  auto anchor = utc("2026-03-07 23:10");
  auto s = parse_ok("every 2h", "America/New_York", anchor);
  BOOST_CHECK(s.what() == cron_schedule::kind::every);
  // Across New York's spring-forward night the spacing stays 2 hours.
  auto f = fires(s, anchor, 4);
  std::vector<std::string> want{"2026-03-08 01:10", "2026-03-08 03:10",
                                "2026-03-08 05:10", "2026-03-08 07:10"};
  BOOST_CHECK_EQUAL_COLLECTIONS(f.begin(), f.end(), want.begin(), want.end());
  // From any point the next slot is on the anchor's grid, strictly after.
  BOOST_CHECK_EQUAL(show(*s.next_after(utc("2026-03-09 03:10"))),
                    "2026-03-09 05:10");
  BOOST_CHECK_EQUAL(show(*s.next_after(utc("2026-03-09 04:00"))),
                    "2026-03-09 05:10");
  BOOST_CHECK_EQUAL(parse_ok("every 15m", "UTC", anchor).describe(),
                    "every 15 minutes");
  BOOST_CHECK_EQUAL(parse_ok("every 1h30m", "UTC", anchor).describe(),
                    "every 1 hour 30 minutes");
}

BOOST_AUTO_TEST_CASE(cron_fields_lists_ranges_steps_and_names) {
  auto from = utc("2026-06-05 12:00"); // a Friday
  auto weekdays = parse_ok("0 9 * * 1-5", "UTC", from);
  auto f = fires(weekdays, from, 3);
  std::vector<std::string> want{"2026-06-08 09:00", "2026-06-09 09:00",
                                "2026-06-10 09:00"};
  BOOST_CHECK_EQUAL_COLLECTIONS(f.begin(), f.end(), want.begin(), want.end());
  BOOST_CHECK_EQUAL(weekdays.describe(),
                    "at 09:00 on Monday through Friday (UTC)");

  auto names = parse_ok("30 8 * JAN,jun mon,FRI", "UTC", from);
  f = fires(names, from, 3);
  want = {"2026-06-08 08:30", "2026-06-12 08:30", "2026-06-15 08:30"};
  BOOST_CHECK_EQUAL_COLLECTIONS(f.begin(), f.end(), want.begin(), want.end());

  auto steps = parse_ok("*/20 10-11 * * *", "UTC", from);
  f = fires(steps, from, 7);
  want = {"2026-06-06 10:00", "2026-06-06 10:20", "2026-06-06 10:40",
          "2026-06-06 11:00", "2026-06-06 11:20", "2026-06-06 11:40",
          "2026-06-07 10:00"};
  BOOST_CHECK_EQUAL_COLLECTIONS(f.begin(), f.end(), want.begin(), want.end());

  auto range_step = parse_ok("5-30/10 0 * * *", "UTC", from);
  f = fires(range_step, from, 4);
  want = {"2026-06-06 00:05", "2026-06-06 00:15", "2026-06-06 00:25",
          "2026-06-07 00:05"};
  BOOST_CHECK_EQUAL_COLLECTIONS(f.begin(), f.end(), want.begin(), want.end());

  // 7 is Sunday too.
  auto sunday = parse_ok("0 0 * * 7", "UTC", from);
  BOOST_CHECK_EQUAL(show(*sunday.next_after(from)), "2026-06-07 00:00");

  auto hourly = parse_ok("@hourly", "UTC", from);
  BOOST_CHECK_EQUAL(show(*hourly.next_after(from)), "2026-06-05 13:00");
  auto yearly = parse_ok("@yearly", "UTC", from);
  BOOST_CHECK_EQUAL(show(*yearly.next_after(from)), "2027-01-01 00:00");
}

BOOST_AUTO_TEST_CASE(day_of_month_and_day_of_week_use_the_or_rule) {
  auto from = utc("2026-06-01 00:30"); // Monday the 1st
  // Both restricted: the 15th OR any Friday.
  auto either = parse_ok("0 0 15 * FRI", "UTC", from);
  auto f = fires(either, from, 4);
  std::vector<std::string> want{"2026-06-05 00:00", "2026-06-12 00:00",
                                "2026-06-15 00:00", "2026-06-19 00:00"};
  BOOST_CHECK_EQUAL_COLLECTIONS(f.begin(), f.end(), want.begin(), want.end());
  // One restricted: only that one counts.
  auto dom = parse_ok("0 0 15 * *", "UTC", from);
  BOOST_CHECK_EQUAL(show(*dom.next_after(from)), "2026-06-15 00:00");
  // A field starting with * counts as unrestricted: AND with */2.
  auto both = parse_ok("0 0 */2 * MON", "UTC", from);
  // Odd days (1, 3, ...) that are Mondays: June 1 has passed, then 15.
  BOOST_CHECK_EQUAL(show(*both.next_after(from)), "2026-06-15 00:00");
  // Leap day.
  auto leap = parse_ok("0 12 29 2 *", "UTC", from);
  BOOST_CHECK_EQUAL(show(*leap.next_after(from)), "2028-02-29 12:00");
}

BOOST_AUTO_TEST_CASE(cron_times_are_wall_clock_in_the_zone) {
  auto from = utc("2026-01-10 00:00");
  auto berlin = parse_ok("0 9 * * *", "Europe/Berlin", from);
  BOOST_CHECK_EQUAL(show(*berlin.next_after(from)), "2026-01-10 08:00");
  auto summer = berlin.next_after(utc("2026-07-10 00:00"));
  BOOST_CHECK_EQUAL(show(*summer), "2026-07-10 07:00");
  BOOST_CHECK_EQUAL(berlin.zone_name(), "Europe/Berlin");
  BOOST_CHECK(contains(berlin.describe(), "(Europe/Berlin)"));
}

// Spring forward: 02:30 does not exist on the day; it fires once at the
// first valid time after the gap (03:00 local), every other day at 02:30.
BOOST_AUTO_TEST_CASE(spring_forward_runs_a_skipped_time_once_at_the_gap_end) {
  struct zone_case {
    const char* zone;
    const char* day_before; // UTC, two days before the transition
    const char* gap_fire;   // the local time it fires at on the day
    const char* gap_day;
  } cases[] = {
    {"America/New_York", "2026-03-06 12:00", "2026-03-08 03:00",
     "2026-03-08"},
    {"Europe/Berlin", "2026-03-27 12:00", "2026-03-29 03:00", "2026-03-29"},
    // Southern hemisphere: Sydney springs forward in October.
    {"Australia/Sydney", "2026-10-02 00:00", "2026-10-04 03:00",
     "2026-10-04"},
  };
  for (auto& c : cases) {
    BOOST_TEST_CONTEXT(c.zone) {
      auto s = parse_ok("30 2 * * *", c.zone, utc(c.day_before));
      auto t = utc(c.day_before);
      std::vector<std::string> seen;
      for (int i = 0; i < 3; ++i) {
        t = *s.next_after(t);
        seen.push_back(local(t, c.zone));
      }
      // The day before at 02:30, the gap day at 03:00, the next at 02:30.
      BOOST_CHECK(contains(seen[0], " 02:30"));
      BOOST_CHECK_EQUAL(seen[1], c.gap_fire);
      BOOST_CHECK(contains(seen[2], " 02:30"));
      // Several slots inside the gap fire once, at its end.
      auto every15 = parse_ok("*/15 2 * * *", c.zone, utc(c.day_before));
      auto gap_start = utc(c.day_before) + hours{12};
      int on_gap_day = 0;
      auto u = gap_start;
      for (int i = 0; i < 8; ++i) {
        u = *every15.next_after(u);
        if (local(u, c.zone).rfind(c.gap_day, 0) == 0)
          ++on_gap_day;
      }
      BOOST_CHECK_EQUAL(on_gap_day, 1);
    }
  }
}

// Fall back: 01:30 (New York, Berlin: 02:30) happens twice; it fires once,
// at the first occurrence.
BOOST_AUTO_TEST_CASE(fall_back_runs_a_repeated_time_once_first_occurrence) {
  struct zone_case {
    const char* zone;
    const char* expr;
    const char* from;
    const char* first_utc; // the first occurrence
    const char* next_utc;  // the next day's run
  } cases[] = {
    // New York: 01:30 EDT = 05:30 UTC (01:30 EST would be 06:30 UTC).
    {"America/New_York", "30 1 * * *", "2026-10-31 12:00",
     "2026-11-01 05:30", "2026-11-02 06:30"},
    // Berlin: 02:30 CEST = 00:30 UTC (02:30 CET would be 01:30 UTC).
    {"Europe/Berlin", "30 2 * * *", "2026-10-24 12:00", "2026-10-25 00:30",
     "2026-10-26 01:30"},
    // Sydney falls back in April: 02:30 AEDT = 15:30 UTC the day before.
    {"Australia/Sydney", "30 2 * * *", "2026-04-04 00:00",
     "2026-04-04 15:30", "2026-04-05 16:30"},
  };
  for (auto& c : cases) {
    BOOST_TEST_CONTEXT(c.zone) {
      auto s = parse_ok(c.expr, c.zone, utc(c.from));
      auto f = fires(s, utc(c.from), 2);
      BOOST_REQUIRE_EQUAL(f.size(), 2u);
      BOOST_CHECK_EQUAL(f[0], c.first_utc);
      BOOST_CHECK_EQUAL(f[1], c.next_utc);
      // Asked from inside the second occurrence, the repeated time is not
      // run again.
      auto inside = utc(c.first_utc) + minutes{70};
      BOOST_CHECK_EQUAL(show(*s.next_after(inside)), c.next_utc);
    }
  }
  // Every 30 minutes through New York's repeated hour: 01:00 and 01:30
  // once each (EDT), then 02:00 EST.
  auto s = parse_ok("*/30 1-2 * * *", "America/New_York",
                    utc("2026-11-01 04:00"));
  auto f = fires(s, utc("2026-11-01 04:00"), 4);
  std::vector<std::string> want{"2026-11-01 05:00", "2026-11-01 05:30",
                                "2026-11-01 07:00", "2026-11-01 07:30"};
  BOOST_CHECK_EQUAL_COLLECTIONS(f.begin(), f.end(), want.begin(), want.end());
}

BOOST_AUTO_TEST_CASE(iso_times_with_and_without_offsets) {
  auto anchor = utc("2026-06-01 00:00");
  auto berlin = parse_ok("2026-12-24T09:00", "Europe/Berlin", anchor);
  BOOST_CHECK(berlin.what() == cron_schedule::kind::once_at);
  BOOST_CHECK_EQUAL(show(*berlin.next_after(anchor)), "2026-12-24 08:00");
  BOOST_CHECK(!berlin.next_after(utc("2026-12-24 08:00")));
  BOOST_CHECK_EQUAL(berlin.describe(),
                    "once at 2026-12-24 09:00 (Europe/Berlin)");
  auto z = parse_ok("2026-12-24T09:00:30Z", "Europe/Berlin", anchor);
  BOOST_CHECK(*z.next_after(anchor) == utc("2026-12-24 09:00") + seconds{30});
  auto plus = parse_ok("2026-12-24T09:00+05:30", "UTC", anchor);
  BOOST_CHECK_EQUAL(show(*plus.next_after(anchor)), "2026-12-24 03:30");
  auto minus = parse_ok("2026-12-24T09:00-0800", "UTC", anchor);
  BOOST_CHECK_EQUAL(show(*minus.next_after(anchor)), "2026-12-24 17:00");
  // A local time in the spring-forward gap resolves to the gap's end.
  auto gap = parse_ok("2026-03-08T02:30", "America/New_York", anchor
                                                             - date::days{200});
  BOOST_CHECK_EQUAL(local(*gap.next_after(anchor - date::days{200}),
                          "America/New_York"),
                    "2026-03-08 03:00");
}

BOOST_AUTO_TEST_CASE(invalid_schedules_get_clear_errors) {
  BOOST_CHECK(contains(parse_error(""), "empty"));
  BOOST_CHECK(contains(parse_error("0 25 * * *"),
                       "hour: 25 is out of range 0-23"));
  BOOST_CHECK(contains(parse_error("60 * * * *"),
                       "minute: 60 is out of range 0-59"));
  BOOST_CHECK(contains(parse_error("0 0 0 * *"),
                       "day of month: 0 is out of range 1-31"));
  BOOST_CHECK(contains(parse_error("0 0 * 13 *"),
                       "month: 13 is out of range 1-12"));
  BOOST_CHECK(contains(parse_error("0 0 * * 8"),
                       "day of week: 8 is out of range 0-7"));
  BOOST_CHECK(contains(parse_error("0 0 * * FUNDAY"), "'FUNDAY'"));
  BOOST_CHECK(contains(parse_error("0 0 * * 5-1"), "backwards"));
  BOOST_CHECK(contains(parse_error("*/0 * * * *"), "step 0"));
  BOOST_CHECK(contains(parse_error("0 0 * *"), "got 4 fields"));
  BOOST_CHECK(contains(parse_error("0 0 1,,2 * *"), "empty list item"));
  BOOST_CHECK(contains(parse_error("0 0 31 2 *"), "never fires"));
  BOOST_CHECK(contains(parse_error("0 0 31 4,6,9,11 *"), "never fires"));
  BOOST_CHECK(contains(parse_error("every 30s"), "at least 1 minute"));
  BOOST_CHECK(contains(parse_error("every"), "expected"));
  BOOST_CHECK(contains(parse_error("in 5 parsecs"), "unknown unit"));
  BOOST_CHECK(contains(parse_error("in 5"), "needs a unit"));
  BOOST_CHECK(contains(parse_error("in 99999999999h"), "too large"));
  BOOST_CHECK(contains(parse_error("in 20000d"), "at most 10 years"));
  BOOST_CHECK(contains(parse_error("2026-02-30T09:00"), "does not exist"));
  BOOST_CHECK(contains(parse_error("2026-12-24T25:00"), "out of range"));
  BOOST_CHECK(contains(parse_error("2026-12-24 09:00"), "ISO 8601"));
  BOOST_CHECK(contains(parse_error("2026-12-24T09:00+25:00"),
                       "out of range"));
  BOOST_CHECK(contains(parse_error("@fortnightly"), "unknown alias"));
  BOOST_CHECK(contains(parse_error(std::string(300, '*')), "256 bytes"));
  // Errors name the schedule.
  BOOST_CHECK(contains(parse_error("0 25 * * *"), "schedule '0 25 * * *'"));
}

BOOST_AUTO_TEST_CASE(unknown_zones_are_refused_by_name) {
  auto e = parse_error("every 1h", "Mars/Olympus_Mons");
  BOOST_CHECK(contains(e, "unknown time zone 'Mars/Olympus_Mons'"));
  BOOST_CHECK(!cron_check_zone("Europe/Atlantis").ok());
  BOOST_CHECK(!cron_check_zone("").ok());
  BOOST_CHECK(!cron_check_zone("../../etc/passwd").ok());
  BOOST_CHECK(cron_check_zone("Asia/Kolkata").ok());
  BOOST_CHECK(cron_check_zone("UTC").ok());
}

BOOST_AUTO_TEST_CASE(the_default_zone_is_the_local_one_by_name) {
  // TZ names the local zone; the schedule records its IANA name.
  ::setenv("TZ", "Asia/Tokyo", 1);
  BOOST_CHECK_EQUAL(cron_local_zone_name(), "Asia/Tokyo");
  auto s = parse_ok("0 9 * * *", "", utc("2026-01-01 00:00"));
  BOOST_CHECK_EQUAL(s.zone_name(), "Asia/Tokyo");
  // 09:00 in Tokyo is 00:00 UTC; strictly after it: the next day.
  BOOST_CHECK_EQUAL(show(*s.next_after(utc("2026-01-01 00:00"))),
                    "2026-01-02 00:00");
  ::unsetenv("TZ");
  BOOST_CHECK(!cron_local_zone_name().empty());
  BOOST_CHECK(cron_check_zone(cron_local_zone_name()).ok());
}

// The zones come from the system's tz database (tzdata, read by libc too):
// every zone of zone1970.tab is known, and the library's UTC offsets agree
// with libc's at instants around this year's transitions.
BOOST_AUTO_TEST_CASE(zones_are_the_systems_tz_database) {
  std::ifstream tab("/usr/share/zoneinfo/zone1970.tab");
  BOOST_REQUIRE_MESSAGE(tab.good(), "tzdata is not installed");
  std::vector<std::string> zones;
  std::string line;
  while (std::getline(tab, line)) {
    if (line.empty() || line[0] == '#')
      continue;
    std::istringstream fields{line};
    std::string codes, coords, zone;
    std::getline(fields, codes, '\t');
    std::getline(fields, coords, '\t');
    std::getline(fields, zone, '\t');
    zones.push_back(zone);
  }
  BOOST_REQUIRE_GT(zones.size(), 200u);
  int compared = 0;
  for (auto& z : zones) {
    BOOST_CHECK_MESSAGE(cron_check_zone(z).ok(), z);
    const date::time_zone* tz = nullptr;
    try {
      tz = date::locate_zone(z);
    } catch (const std::exception&) {
      continue;
    }
    ::setenv("TZ", z.c_str(), 1);
    ::tzset();
    for (const char* at : {"2026-01-15 12:00", "2026-07-15 12:00"}) {
      auto t = utc(at);
      time_t secs = static_cast<time_t>(cron_ms(t) / 1000);
      std::tm tm{};
      ::localtime_r(&secs, &tm);
      auto info = tz->get_info(floor<seconds>(t));
      BOOST_CHECK_MESSAGE(info.offset.count() == tm.tm_gmtoff,
                          z + " at " + at + ": date says "
                            + std::to_string(info.offset.count())
                            + ", libc says " + std::to_string(tm.tm_gmtoff));
      ++compared;
    }
  }
  ::unsetenv("TZ");
  ::tzset();
  BOOST_CHECK_GT(compared, 400);
}
