// File: tests/support/temp_dir.hpp
//
// A private temporary directory that is removed (recursively) when the
// object goes out of scope. Used by every test that touches the file system.
#pragma once

#include <string>

namespace mibyan::test {

class temp_dir {
public:
  /// Creates a fresh 0700 directory under $TMPDIR (or /tmp).
  temp_dir();
  ~temp_dir();
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;

  const std::string& path() const { return path_; }

  /// Returns path() + "/" + rel.
  std::string operator/(const std::string& rel) const;

  /// Writes `content` to path()/rel, creating parent directories.
  std::string write(const std::string& rel, const std::string& content) const;

  /// Returns the content of path()/rel, or "" if it cannot be read.
  std::string read(const std::string& rel) const;

private:
  std::string path_;
};

/// Returns the whole content of a file, or "" on error.
std::string slurp(const std::string& path);

} // namespace mibyan::test
