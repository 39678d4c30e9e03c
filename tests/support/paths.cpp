// File: tests/support/paths.cpp
#include "tests/support/paths.hpp"

#include <cstdlib>

namespace mibyan::test {

const std::string& mibyan_binary() {
  static const std::string path{MIBYAN_BINARY};
  return path;
}

const std::string& test_source_dir() {
  static const std::string path{MIBYAN_TEST_DIR};
  return path;
}

const std::string& source_dir() {
  static const std::string path{MIBYAN_SOURCE_DIR};
  return path;
}

std::string shared_data_dir() {
  if (const char* env = std::getenv("MIBYAN_SHARED_DIR"); env != nullptr && *env != '\0')
    return env;
  return MIBYAN_SHARED_DIR;
}

} // namespace mibyan::test
