// Fixture for scripts/check_errors.py (errors_check_detects_*): a
// cross-folder header (tools/user.cpp includes it) with the old error
// shapes the check must report.
#pragma once

#include <optional>
#include <string>

namespace fixture {

/// Loads the thing. Returns false and sets `*error` on failure.
bool load_thing(const std::string& path, std::string* error);

/// Returns why `x` is refused, or nullopt.
std::optional<std::string> refuse_thing(int x);

/// Saves the thing. Returns "" on success, else the error text.
std::string save_thing(const std::string& path);

/// The outcome of open_thing.
struct open_outcome {
  int fd = -1;
  std::string error;
};

} // namespace fixture
