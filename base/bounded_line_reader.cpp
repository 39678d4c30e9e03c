#include "base/bounded_line_reader.hpp"

#include <cerrno>
#include <cstring>

#include <unistd.h>

namespace mibyan {

void bounded_line_buffer::append(const char* data, size_t size) {
  if (pos_ == raw_.size()) {
    raw_.clear();
    pos_ = 0;
  }
  raw_.append(data, size);
}

bounded_line_buffer::status bounded_line_buffer::next(std::string& out,
                                                      uint64_t& length) {
  out.clear();
  length = 0;
  auto start = raw_.data() + pos_;
  auto avail = raw_.size() - pos_;
  auto nl = static_cast<const char*>(std::memchr(start, '\n', avail));
  auto take = nl ? static_cast<size_t>(nl - start) : avail;
  if (cur_len_ + take <= max_)
    cur_.append(start, take);
  else if (!cur_.empty())
    std::string{}.swap(cur_); // over the cap: keep nothing
  cur_len_ += take;
  pos_ += take;
  in_line_ = in_line_ || take > 0;
  if (nl != nullptr) {
    ++pos_;
  } else {
    // Everything scanned: drop the consumed bytes.
    raw_.clear();
    pos_ = 0;
    if (!finished_)
      return status::need_more;
    if (!in_line_)
      return status::eof;
    // A last line without '\n'.
  }
  length = cur_len_;
  auto result = length > max_ ? status::too_long : status::line;
  if (result == status::line)
    out.swap(cur_);
  cur_.clear();
  cur_len_ = 0;
  in_line_ = false;
  return result;
}

bounded_line_reader::status bounded_line_reader::next(std::string& out,
                                                      uint64_t& length) {
  for (;;) {
    switch (lines_.next(out, length)) {
      case bounded_line_buffer::status::line:
        return status::line;
      case bounded_line_buffer::status::too_long:
        return status::too_long;
      case bounded_line_buffer::status::eof:
        return status::eof;
      case bounded_line_buffer::status::need_more:
        break;
    }
    auto n = ::read(fd_, chunk_.data(), chunk_.size());
    if (n < 0 && errno == EINTR)
      continue;
    if (n > 0)
      lines_.append(chunk_.data(), static_cast<size_t>(n));
    else
      lines_.finish(); // end of input or a read error
  }
}

} // namespace mibyan
