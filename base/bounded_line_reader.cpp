#include "base/bounded_line_reader.hpp"

#include <cerrno>
#include <cstring>

#include <unistd.h>

namespace mibyan {

bool bounded_line_reader::fill() {
  if (eof_)
    return false;
  for (;;) {
    auto n = ::read(fd_, buf_.data(), buf_.size());
    if (n > 0) {
      pos_ = 0;
      end_ = static_cast<size_t>(n);
      return true;
    }
    if (n < 0 && errno == EINTR)
      continue;
    eof_ = true;
    return false;
  }
}

bounded_line_reader::status bounded_line_reader::next(std::string& out,
                                                      uint64_t& length) {
  out.clear();
  length = 0;
  bool any = false;
  for (;;) {
    if (pos_ == end_ && !fill()) {
      if (!any)
        return status::eof;
      break; // a last line without '\n'
    }
    any = true;
    auto start = buf_.data() + pos_;
    auto avail = end_ - pos_;
    auto nl = static_cast<const char*>(std::memchr(start, '\n', avail));
    auto take = nl ? static_cast<size_t>(nl - start) : avail;
    if (length + take <= max_)
      out.append(start, take);
    else if (!out.empty())
      std::string{}.swap(out); // over the cap: keep nothing
    length += take;
    pos_ += take;
    if (nl) {
      ++pos_;
      break;
    }
  }
  return length > max_ ? status::too_long : status::line;
}

} // namespace mibyan
