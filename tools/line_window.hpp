// File: tools/line_window.hpp
//
// Internal to the read_file tool (tools/read_file.cpp): the window of
// numbered lines a page shows, fed a text in chunks, and the loop that
// feeds it from a file. A window keeps only the lines it shows (each cut at
// max_line characters, "N|content", within a character budget), counts the
// lines it sees, and says where the first line after it starts, so that
// the next page of a sequential read can start there. One thread.
#pragma once

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include <unistd.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

namespace mibyan::read_file_detail {

// Block size for reading a page of lines.
constexpr size_t page_block_bytes = 64 * 1024;

// The first '\n' in [p, p + n), or null. Lines are short as a rule: the
// first 64 bytes are searched inline, the rest by memchr.
inline const char* find_newline(const char* p, size_t n) {
#ifdef __SSE2__
  const __m128i nl = _mm_set1_epi8('\n');
  for (int k = 0; k < 4 && n >= 16; ++k) {
    auto m = _mm_movemask_epi8(_mm_cmpeq_epi8(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)), nl));
    if (m != 0)
      return p + __builtin_ctz(static_cast<unsigned>(m));
    p += 16;
    n -= 16;
  }
#endif
  return static_cast<const char*>(std::memchr(p, '\n', n));
}

// Consumes a text in chunks; keeps the lines [first, first + limit) rendered
// as "N|content" within a character budget, and counts the lines it sees.
// The text fed may start at any line start; `start_line` is its number.
class line_window {
public:
  line_window(int64_t first, int64_t limit, size_t max_line, size_t budget,
              int64_t start_line = 1)
    : first_(first), last_(first + limit - 1), max_line_(max_line),
      budget_(budget), line_(start_line) {
  }

  /// Reserves room for the rendered lines of about `bytes` of input.
  void reserve(size_t bytes) {
    auto lines = static_cast<size_t>(last_ - first_ + 1);
    content_.reserve(std::min({budget_, bytes + bytes / 4, lines * 160})
                     + 64);
  }

  void feed(const char* data, size_t size) {
    const char* begin = data;
    const size_t total = size;
    while (size > 0) {
      auto nl = find_newline(data, size);
      size_t seg = nl ? static_cast<size_t>(nl - data) : size;
      if (nl && cur_bytes_ == 0 && wanted() && whole_line(data, seg)) {
        // The common case: a whole line in the chunk, rendered as is.
        data += seg + 1;
        size -= seg + 1;
        line_started(fed_ + static_cast<size_t>(data - begin));
        continue;
      }
      if (wanted())
        take(data, seg);
      pending_ = pending_ || seg > 0;
      if (!nl)
        break;
      end_line();
      data += seg + 1;
      size -= seg + 1;
      line_started(fed_ + static_cast<size_t>(data - begin));
    }
    fed_ += total;
  }

  // The first line after the window (the one the budget stopped at, or
  // the one after the last asked for) and where it starts, in bytes from
  // the start of the text fed; line 0 when the text ended first.
  std::pair<int64_t, size_t> resume_point() const {
    return {mark_line_, mark_start_};
  }

  void finish() {
    if (pending_)
      end_line();
  }

  // True once no further input can change the window.
  bool done() const { return line_ > last_ || budget_stop_ != 0; }

  // Lines seen so far, counting from line 1 (so only meaningful as a file's
  // line count when the whole file from line 1 was fed and finished).
  int64_t total_lines() const { return line_ - 1; }
  // Moves the rendered lines out (the window is spent afterwards).
  std::string take_content() { return std::move(content_); }
  // First and last line shown (last < first when none was).
  int64_t shown_first() const { return first_; }
  int64_t shown_last() const { return shown_last_; }
  // The line at which the character budget stopped the window, or 0.
  int64_t budget_stop() const { return budget_stop_; }

private:
  bool wanted() const {
    return line_ >= first_ && line_ <= last_ && budget_stop_ == 0;
  }

  // end_line for a line not started in an earlier chunk and not cut:
  // renders [data, data + size) without copying it to cur_ first.
  // Returns false (and does nothing) for a line that must be cut.
  bool whole_line(const char* data, size_t size) {
    bool cr = size > 0 && data[size - 1] == '\r';
    if (size > max_line_ + (cr ? 1 : 0))
      return false;
    size_t len = size - (cr ? 1 : 0);
    // "\nN|" in one piece, then the line.
    char head[2 + sizeof num_];
    size_t h = 0;
    if (!content_.empty())
      head[h++] = '\n';
    auto num = number();
    std::memcpy(head + h, num.data(), num.size());
    h += num.size();
    head[h++] = '|';
    if (shown_last_ >= first_ && content_.size() + h + len > budget_) {
      budget_stop_ = line_;
      mark(line_start_);
    } else {
      content_.append(head, h);
      content_.append(data, len);
      shown_last_ = line_;
    }
    pending_ = false;
    ++line_;
    return true;
  }

  void take(const char* data, size_t size) {
    // Keep a little more than the cut so a trailing '\r' can be dropped.
    size_t room = max_line_ + 2 > cur_.size() ? max_line_ + 2 - cur_.size()
                                              : 0;
    cur_.append(data, std::min(room, size));
    cur_bytes_ += size;
  }

  void end_line() {
    if (wanted()) {
      bool cut = cur_bytes_ > max_line_ + (ends_cr() ? 1 : 0);
      if (!cut && ends_cr())
        cur_.pop_back();
      if (cut) {
        size_t n = max_line_;
        // Do not split a UTF-8 sequence.
        while (n > 0 && (static_cast<unsigned char>(cur_[n]) & 0xc0) == 0x80)
          --n;
        cur_.resize(n);
        cur_ += "... [truncated]";
      }
      auto num = number();
      size_t need = num.size() + 1 + cur_.size()
                    + (content_.empty() ? 0 : 1);
      if (shown_last_ >= first_ && content_.size() + need > budget_) {
        budget_stop_ = line_;
        mark(line_start_);
      } else {
        if (!content_.empty())
          content_ += '\n';
        content_.append(num.data(), num.size());
        content_ += '|';
        content_ += cur_;
        shown_last_ = line_;
      }
    }
    cur_.clear();
    cur_bytes_ = 0;
    pending_ = false;
    ++line_;
  }

  bool ends_cr() const { return !cur_.empty() && cur_.back() == '\r'; }

  // Line line_ starts at byte `at` of the text fed.
  void line_started(size_t at) {
    line_start_ = at;
    if (line_ == last_ + 1)
      mark(at);
  }

  void mark(size_t at) {
    if (mark_line_ == 0) {
      mark_line_ = line_;
      mark_start_ = at;
    }
  }

  // The decimal digits of line_: counted up from the previous line's
  // digits when the lines are consecutive (the common case).
  std::string_view number() {
    if (num_line_ + 1 == line_ && num_line_ > 0) {
      size_t k = sizeof num_;
      while (k > num_at_ && num_[k - 1] == '9')
        num_[--k] = '0';
      if (k == num_at_)
        num_[--num_at_] = '1';
      else
        ++num_[k - 1];
    } else if (num_line_ != line_) {
      char tmp[sizeof num_];
      auto end = std::to_chars(tmp, tmp + sizeof tmp, line_).ptr;
      auto len = static_cast<size_t>(end - tmp);
      num_at_ = sizeof num_ - len;
      std::memcpy(num_ + num_at_, tmp, len);
    }
    num_line_ = line_;
    return {num_ + num_at_, sizeof num_ - num_at_};
  }

  int64_t first_;
  int64_t last_;
  size_t max_line_;
  size_t budget_;
  int64_t line_;
  int64_t shown_last_ = 0;
  int64_t budget_stop_ = 0;
  bool pending_ = false;
  std::string cur_;
  size_t cur_bytes_ = 0;
  std::string content_;
  size_t fed_ = 0;        // bytes fed before the current chunk
  size_t line_start_ = 0; // where line_ starts
  int64_t mark_line_ = 0;
  size_t mark_start_ = 0;
  char num_[24] = {};
  size_t num_at_ = sizeof num_;
  int64_t num_line_ = 0; // the line num_ holds (0: none)
};

// Feeds bytes [from, to) of `fd` to `window` block by block until the
// window is done or `to` (or the end of the file) is reached, then finishes
// it. Returns 0, an errno value, or ECANCELED when `stop()` said so.
template <class Stop>
inline int read_lines(int fd, int64_t from, int64_t to, line_window& window,
               const Stop& stop) {
  std::unique_ptr<char[]> buf{new char[page_block_bytes]};
  int64_t pos = from;
  window.reserve(static_cast<size_t>(std::max<int64_t>(0, to - from)));
  while (pos < to && !window.done()) {
    if (stop())
      return ECANCELED;
    auto want = static_cast<size_t>(
      std::min<int64_t>(static_cast<int64_t>(page_block_bytes), to - pos));
    auto n = ::pread(fd, buf.get(), want, static_cast<off_t>(pos));
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return errno;
    }
    if (n == 0)
      break;
    window.feed(buf.get(), static_cast<size_t>(n));
    pos += n;
  }
  window.finish();
  return 0;
}

} // namespace mibyan::read_file_detail
