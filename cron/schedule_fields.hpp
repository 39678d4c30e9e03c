// File: cron/schedule_fields.hpp
//
// What the schedule's parser (cron/schedule.cpp) and its description in
// words (cron/schedule_words.cpp) share: the duration units, the month and
// day names cron fields accept, the @ aliases and the field split. Pure;
// any thread. Only cron/schedule*.cpp include it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mibyan::cron_fields {

constexpr int64_t ms_per_s = 1000;
constexpr int64_t ms_per_m = 60 * ms_per_s;
constexpr int64_t ms_per_h = 60 * ms_per_m;
constexpr int64_t ms_per_d = 24 * ms_per_h;

/// "JAN".."DEC" and "SUN".."SAT", as cron fields write them.
extern const char* const month_names[12];
extern const char* const day_names[7];

/// The words of `s` between runs of white space.
std::vector<std::string> split_ws(std::string_view s);

/// The expression of a cron alias ("@daily", lower case), nullptr for none.
const char* alias_expr(std::string_view low);

} // namespace mibyan::cron_fields
