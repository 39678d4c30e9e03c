// File: base/bounded_line_reader.hpp
//
// Reads '\n'-terminated lines from a file descriptor with a cap on the
// bytes kept per line: the rest of an over-long line is read and
// discarded, never stored, so memory stays bounded whatever the input.
// A last line without '\n' counts as a line. A '\r' before the '\n' is
// kept (callers that care strip it).
//
// Blocking reads on the caller's thread; EINTR is retried. Thread safety:
// none; one owner.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mibyan {

class bounded_line_reader {
public:
  enum class status { line, too_long, eof };

  bounded_line_reader(int fd, size_t max_line) : fd_(fd), max_(max_line) {}

  /// Reads the next line into `out` (without '\n'). `too_long`: the line
  /// had more than `max_line` bytes; `out` is empty and `length` holds the
  /// full length. `eof`: no more lines (or a read error).
  status next(std::string& out, uint64_t& length);

private:
  bool fill();

  int fd_;
  size_t max_;
  std::vector<char> buf_ = std::vector<char>(65536);
  size_t pos_ = 0, end_ = 0;
  bool eof_ = false;
};

} // namespace mibyan
