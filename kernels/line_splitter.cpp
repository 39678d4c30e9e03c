#include "kernels/line_splitter.hpp"

#include <cstring>

namespace mibyan {

bool line_splitter::feed(std::string_view chunk, const line_fn& on_line) {
  if (failed_)
    return false;
  while (!chunk.empty()) {
    auto nl = static_cast<const char*>(
      std::memchr(chunk.data(), '\n', chunk.size()));
    if (nl == nullptr) {
      work_ += chunk.size();
      if (partial_.size() + chunk.size() > max_line_) {
        failed_ = true;
        clear();
        return false;
      }
      work_ += chunk.size();
      partial_.append(chunk.data(), chunk.size());
      return true;
    }
    auto len = static_cast<size_t>(nl - chunk.data());
    work_ += len + 1;
    if (partial_.size() + len > max_line_) {
      failed_ = true;
      clear();
      return false;
    }
    if (partial_.empty()) {
      on_line(chunk.substr(0, len));
    } else {
      work_ += len;
      partial_.append(chunk.data(), len);
      std::string line = std::move(partial_);
      partial_.clear();
      on_line(line);
    }
    chunk.remove_prefix(len + 1);
  }
  return true;
}

void line_splitter::clear() {
  std::string{}.swap(partial_);
}

} // namespace mibyan
