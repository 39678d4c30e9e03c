// File: base/sse_parser.cpp
#include "base/sse_parser.hpp"

#include <cstring>
#include <utility>

namespace mibyan {

namespace {

constexpr std::string_view utf8_bom = "\xEF\xBB\xBF";

} // namespace

sse_parser::sse_parser(size_t max_event_bytes)
  : max_event_bytes_(max_event_bytes == 0 ? default_max_event_bytes
                                          : max_event_bytes) {
  // nop
}

bool sse_parser::feed(std::string_view bytes, std::vector<sse_event>& out) {
  if (failed())
    return false;
  if (finished_)
    return true;
  bytes_ += bytes.size();
  std::string first;
  if (!bom_checked_) {
    // Hold back the first bytes until we know whether they are a BOM.
    head_.append(bytes.data(), bytes.size());
    auto n = std::min(head_.size(), utf8_bom.size());
    if (std::string_view{head_}.substr(0, n) != utf8_bom.substr(0, n)) {
      bom_checked_ = true;
    } else if (head_.size() >= utf8_bom.size()) {
      bom_checked_ = true;
      head_.erase(0, utf8_bom.size());
    } else {
      return true; // a BOM prefix; wait for more bytes
    }
    first.swap(head_);
    bytes = first;
  }
  const char* s = bytes.data();
  size_t n = bytes.size();
  size_t i = 0;
  while (i < n) {
    if (after_cr_) {
      after_cr_ = false;
      if (s[i] == '\n') {
        ++i;
        continue;
      }
    }
    size_t j = i;
    while (j < n && s[j] != '\n' && s[j] != '\r')
      ++j;
    if (line_.size() + (j - i) > max_event_bytes_) {
      fail("SSE line longer than " + std::to_string(max_event_bytes_)
           + " bytes");
      return false;
    }
    line_.append(s + i, j - i);
    if (j == n)
      break;
    after_cr_ = s[j] == '\r';
    i = j + 1;
    process_line(line_, out);
    line_.clear();
    if (failed())
      return false;
  }
  return true;
}

bool sse_parser::finish(std::vector<sse_event>& out) {
  if (failed())
    return false;
  if (finished_)
    return true;
  if (!bom_checked_) {
    // Fewer than three bytes that look like the start of a BOM: not a BOM.
    bom_checked_ = true;
    std::string rest;
    rest.swap(head_);
    bytes_ -= rest.size();
    if (!feed(rest, out))
      return false;
  }
  finished_ = true;
  if (!line_.empty()) {
    process_line(line_, out);
    line_.clear();
    if (failed())
      return false;
  }
  if (have_data_) {
    unterminated_ = true;
    dispatch(out);
  }
  return true;
}

void sse_parser::process_line(std::string_view line,
                              std::vector<sse_event>& out) {
  if (line.empty()) {
    dispatch(out);
    return;
  }
  if (line.front() == ':') {
    ++comments_;
    return;
  }
  std::string_view field = line;
  std::string_view value;
  if (auto pos = line.find(':'); pos != std::string_view::npos) {
    field = line.substr(0, pos);
    value = line.substr(pos + 1);
    if (!value.empty() && value.front() == ' ')
      value.remove_prefix(1);
  }
  if (field == "data") {
    size_t need = data_.size() + value.size() + (have_data_ ? 1 : 0);
    if (need > max_event_bytes_) {
      fail("SSE event larger than " + std::to_string(max_event_bytes_)
           + " bytes");
      return;
    }
    if (have_data_)
      data_ += '\n';
    data_.append(value.data(), value.size());
    have_data_ = true;
  } else if (field == "event") {
    event_type_.assign(value.data(), value.size());
  } else if (field == "id") {
    if (value.find('\0') == std::string_view::npos)
      last_id_.assign(value.data(), value.size());
  } else if (field == "retry") {
    if (!value.empty() && value.size() <= 18
        && value.find_first_not_of("0123456789") == std::string_view::npos)
      retry_ms_ = std::stoll(std::string{value});
  }
  // Unknown fields are ignored.
}

void sse_parser::dispatch(std::vector<sse_event>& out) {
  if (have_data_) {
    sse_event ev;
    ev.event = event_type_.empty() ? "message" : event_type_;
    ev.data = std::move(data_);
    ev.id = last_id_;
    out.push_back(std::move(ev));
    ++events_;
  }
  data_.clear();
  event_type_.clear();
  have_data_ = false;
}

void sse_parser::fail(std::string msg) {
  error_ = std::move(msg);
  line_.clear();
  line_.shrink_to_fit();
  data_.clear();
  data_.shrink_to_fit();
}

} // namespace mibyan
