// File: tools/rg_output.hpp
//
// Helpers for reading ripgrep's output in search_files: the record
// splitter for its line / NUL-separated streams and the decoder of its JSON
// string objects. Not thread-safe per object; no shared state.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "base/json.hpp"

namespace mibyan {

/// Returns the text of a ripgrep string object: {"text": "..."} as is, or
/// {"bytes": "<base64>"} (non-UTF-8 data) decoded and made valid UTF-8;
/// "" for anything else.
std::string rg_string(const json::value* v);

// Splits a byte stream into lines (or NUL-terminated records) and hands
// each complete one to `fn`. Oversized records are reported as `overflow`.
class record_splitter {
public:
  record_splitter(char sep, size_t max_record)
    : sep_(sep), max_record_(max_record) {}

  template <class F>
  void feed(std::string_view data, F&& fn) {
    while (!data.empty()) {
      auto pos = data.find(sep_);
      auto part = data.substr(0, pos);
      if (!skipping_) {
        if (buf_.size() + part.size() > max_record_) {
          skipping_ = true;
          overflow_prefix_ = buf_.substr(0, 64);
          buf_.clear();
        } else {
          buf_.append(part);
        }
      }
      if (pos == std::string_view::npos)
        return;
      if (skipping_) {
        fn(std::string_view{overflow_prefix_}, true);
        skipping_ = false;
      } else {
        fn(std::string_view{buf_}, false);
      }
      buf_.clear();
      data.remove_prefix(pos + 1);
    }
  }

  template <class F>
  void finish(F&& fn) {
    if (!buf_.empty() && !skipping_)
      fn(std::string_view{buf_}, false);
    buf_.clear();
  }

private:
  char sep_;
  size_t max_record_;
  std::string buf_;
  std::string overflow_prefix_;
  bool skipping_ = false;
};

} // namespace mibyan
