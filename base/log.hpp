// File: base/log.hpp
//
// Mibyan's logger (Debian's CAF has its logging compiled out). Lines go to
// stderr and, once `log_to_file` was called, also to a file:
//   2026-11-30T08:00:00.123Z WARN  [kernel] message
// Thread-safe: every line is written under one mutex in one write call.
#pragma once

#include <sstream>
#include <string>
#include <string_view>

namespace mibyan::log {

enum class level : int { debug = 0, info = 1, warning = 2, error = 3,
                         off = 4 };

/// Parses "debug", "info", "warning"/"warn", "error", "off"; returns false
/// for anything else and leaves `out` unchanged.
bool parse_level(std::string_view text, level& out);

/// Sets the minimum level written (default: info; MIBYAN_LOG_LEVEL
/// overrides at start-up).
void set_level(level lvl);
level current_level();

/// Also appends every line to `path` (created 0600). Returns false and
/// leaves file logging off when the file cannot be opened.
bool log_to_file(const std::string& path);

/// Stops writing to stderr (file logging, if any, continues). For commands
/// whose stderr is part of their interface.
void set_stderr_enabled(bool enabled);

/// Writes one line if `lvl` is enabled.
void write(level lvl, std::string_view component, std::string_view message);

inline bool enabled(level lvl) {
  return static_cast<int>(lvl) >= static_cast<int>(current_level());
}

} // namespace mibyan::log

/// Usage: MIBYAN_LOG(info, "kernel", "spawned pid " << pid);
/// The stream expression is only evaluated when the level is enabled.
#define MIBYAN_LOG(lvl, component, expr)                                     \
  do {                                                                       \
    if (::mibyan::log::enabled(::mibyan::log::level::lvl)) {                 \
      std::ostringstream mibyan_log_os_;                                     \
      mibyan_log_os_ << expr;                                                \
      ::mibyan::log::write(::mibyan::log::level::lvl, component,            \
                           mibyan_log_os_.str());                            \
    }                                                                        \
  } while (false)
