#include "base/log.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>

#include <fcntl.h>
#include <unistd.h>

namespace mibyan::log {

namespace {

level initial_level() {
  level lvl = level::info;
  if (const char* env = std::getenv("MIBYAN_LOG_LEVEL"))
    parse_level(env, lvl);
  return lvl;
}

std::atomic<int> min_level{static_cast<int>(initial_level())};
std::atomic<bool> to_stderr{true};
std::mutex file_mutex;
int file_fd = -1;

const char* label(level lvl) {
  switch (lvl) {
    case level::debug: return "DEBUG";
    case level::info: return "INFO ";
    case level::warning: return "WARN ";
    case level::error: return "ERROR";
    default: return "     ";
  }
}

void write_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    auto n = ::write(fd, s.data() + off, s.size() - off);
    if (n <= 0)
      return;
    off += static_cast<size_t>(n);
  }
}

} // namespace

bool parse_level(std::string_view text, level& out) {
  if (text == "debug") out = level::debug;
  else if (text == "info") out = level::info;
  else if (text == "warning" || text == "warn") out = level::warning;
  else if (text == "error") out = level::error;
  else if (text == "off") out = level::off;
  else return false;
  return true;
}

void set_level(level lvl) {
  min_level = static_cast<int>(lvl);
}

level current_level() {
  return static_cast<level>(min_level.load(std::memory_order_relaxed));
}

bool log_to_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
                  0600);
  if (fd < 0)
    return false;
  std::lock_guard<std::mutex> guard{file_mutex};
  if (file_fd >= 0)
    ::close(file_fd);
  file_fd = fd;
  return true;
}

void set_stderr_enabled(bool enabled) {
  to_stderr = enabled;
}

void write(level lvl, std::string_view component, std::string_view message) {
  if (!enabled(lvl))
    return;
  auto now = std::chrono::system_clock::now();
  auto secs = std::chrono::system_clock::to_time_t(now);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
              now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  ::gmtime_r(&secs, &tm);
  char stamp[64];
  std::snprintf(stamp, sizeof(stamp), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
                tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                tm.tm_min, tm.tm_sec, static_cast<int>(ms));
  std::string line;
  line.reserve(message.size() + 64);
  line += stamp;
  line += ' ';
  line += label(lvl);
  line += " [";
  line += component;
  line += "] ";
  line += message;
  line += '\n';
  std::lock_guard<std::mutex> guard{file_mutex};
  if (to_stderr)
    write_all(2, line);
  if (file_fd >= 0)
    write_all(file_fd, line);
}

} // namespace mibyan::log
