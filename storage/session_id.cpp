// File: storage/session_id.cpp
#include "storage/session_id.hpp"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <random>

namespace mibyan {

std::string format_session_id(int64_t started_at_ms, uint32_t random24) {
  std::time_t secs = static_cast<std::time_t>(started_at_ms / 1000);
  std::tm tm{};
  ::localtime_r(&secs, &tm);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%04d%02d%02d_%02d%02d%02d_%06x",
                tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                tm.tm_min, tm.tm_sec, static_cast<unsigned>(random24 & 0xffffff));
  return buf;
}

std::string new_session_id() {
  using namespace std::chrono;
  auto now_ms = duration_cast<milliseconds>(system_clock::now().time_since_epoch())
                  .count();
  std::random_device rd;
  return format_session_id(now_ms, rd());
}

} // namespace mibyan
