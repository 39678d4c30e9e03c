// File: base/bounded_line_reader.hpp
//
// '\n'-terminated lines with a cap on the bytes kept per line: the rest of
// an over-long line is discarded as it arrives, never stored, so memory
// stays bounded whatever the input. A last line without '\n' counts as a
// line. A '\r' before the '\n' is kept (callers that care strip it).
//
//   * `bounded_line_buffer`: push-style; bytes go in as they arrive (for
//     readers driven by an event loop), lines come out. Pure; no I/O.
//   * `bounded_line_reader`: blocking reads from a file descriptor on the
//     caller's thread (EINTR retried), through a bounded_line_buffer.
//
// Thread safety: none; one owner each.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mibyan {

class bounded_line_buffer {
public:
  /// `line`: a complete line. `too_long`: the line had more than
  /// `max_line` bytes; `out` is empty and `length` holds its full length.
  /// `need_more`: no complete line yet (append more or finish). `eof`:
  /// finished and every line handed out.
  enum class status { line, too_long, need_more, eof };

  explicit bounded_line_buffer(size_t max_line) : max_(max_line) {}

  /// Adds bytes read from the stream.
  void append(const char* data, size_t size);

  /// The stream ended: a held partial line becomes the last line.
  void finish() { finished_ = true; }
  bool finished() const { return finished_; }

  /// Takes the next line (see `status`); `out` and `length` as above.
  status next(std::string& out, uint64_t& length);

  /// Bytes held: unread input plus the kept part of the current line. At
  /// most `max_line` plus what was appended since the last `next`.
  size_t held() const { return raw_.size() - pos_ + cur_.size(); }

private:
  size_t max_;
  std::string raw_;   // appended bytes; [pos_, end) not yet scanned
  size_t pos_ = 0;
  std::string cur_;   // kept part of the line being assembled
  uint64_t cur_len_ = 0;
  bool in_line_ = false;
  bool finished_ = false;
};

class bounded_line_reader {
public:
  enum class status { line, too_long, eof };

  bounded_line_reader(int fd, size_t max_line) : fd_(fd), lines_(max_line) {}

  /// Reads the next line into `out` (without '\n'). `too_long`: the line
  /// had more than `max_line` bytes; `out` is empty and `length` holds the
  /// full length. `eof`: no more lines (or a read error).
  status next(std::string& out, uint64_t& length);

private:
  int fd_;
  bounded_line_buffer lines_;
  std::vector<char> chunk_ = std::vector<char>(65536);
};

} // namespace mibyan
