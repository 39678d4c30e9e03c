// File: providers/wire_format.cpp
#include "providers/wire_format.hpp"

#include <cctype>

#include "providers/provider_error.hpp"

namespace mibyan {

namespace {

constexpr std::string_view utf8_bom = "\xEF\xBB\xBF";

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/// Returns the first byte that is neither whitespace nor part of a leading
/// BOM, or '\0' when there is none yet.
char first_significant(std::string_view s) {
  if (s.substr(0, utf8_bom.size()) == utf8_bom)
    s.remove_prefix(utf8_bom.size());
  else if (!s.empty() && utf8_bom.substr(0, s.size()) == s)
    return '\0'; // maybe a BOM still arriving
  for (char c : s)
    if (!is_space(c))
      return c;
  return '\0';
}

bool contains_ci(std::string_view s, std::string_view needle) {
  if (needle.size() > s.size())
    return false;
  for (size_t i = 0; i + needle.size() <= s.size(); ++i) {
    size_t j = 0;
    while (j < needle.size()
           && std::tolower(static_cast<unsigned char>(s[i + j]))
                == needle[j])
      ++j;
    if (j == needle.size())
      return true;
  }
  return false;
}

} // namespace

const char* to_string(wire_format f) {
  return f == wire_format::anthropic ? "anthropic" : "openai";
}

response_decoder::response_decoder(wire_format format, int status,
                                   std::string_view content_type,
                                   size_t max_json_bytes,
                                   size_t max_event_bytes)
  : format_(format),
    status_(status),
    content_type_(content_type),
    max_json_bytes_(max_json_bytes),
    max_event_bytes_(max_event_bytes) {
  if (!success_status(status))
    mode_ = mode::json; // error bodies are decoded whole
}

void response_decoder::decide(bool at_end) {
  char c = first_significant(buffer_);
  if (c == '\0' && !at_end)
    return;
  if (c == '{' || c == '[')
    mode_ = mode::json;
  else if (c != '\0')
    mode_ = mode::sse;
  else // empty body: trust the Content-Type
    mode_ = contains_ci(content_type_, "event-stream") ? mode::sse
                                                       : mode::json;
  if (mode_ == mode::sse) {
    std::string prefix;
    prefix.swap(buffer_);
    feed_sse(prefix);
  }
}

void response_decoder::feed_sse(std::string_view bytes) {
  if (format_ == wire_format::anthropic) {
    if (!anthropic_) {
      anthropic_ = std::make_unique<anthropic::stream_accumulator>(
        max_event_bytes_);
      anthropic_->on_text(on_text_);
      anthropic_->on_reasoning(on_reasoning_);
    }
    anthropic_->feed(bytes);
  } else {
    if (!openai_) {
      openai_ = std::make_unique<openai::stream_accumulator>(
        max_event_bytes_);
      openai_->on_text(on_text_);
      openai_->on_reasoning(on_reasoning_);
    }
    openai_->feed(bytes);
  }
}

void response_decoder::feed(std::string_view bytes) {
  switch (mode_) {
    case mode::sse:
      feed_sse(bytes);
      return;
    case mode::json:
    case mode::undecided:
      if (overflow_)
        return;
      if (buffer_.size() + bytes.size() > max_json_bytes_) {
        overflow_ = true;
        buffer_.clear();
        buffer_.shrink_to_fit();
        return;
      }
      buffer_.append(bytes.data(), bytes.size());
      if (mode_ == mode::undecided)
        decide(false);
      return;
  }
}

chat_response response_decoder::finish() {
  if (mode_ == mode::undecided && !overflow_)
    decide(true);
  if (mode_ == mode::sse) {
    return format_ == wire_format::anthropic ? anthropic_->finish(status_)
                                             : openai_->finish(status_);
  }
  if (overflow_) {
    chat_response r;
    r.http_status = status_;
    r.error = "response body exceeds " + std::to_string(max_json_bytes_)
              + " bytes";
    r.retryable = !success_status(status_) && retryable_status(status_);
    if (!success_status(status_))
      r.error = "HTTP " + std::to_string(status_) + ": " + r.error;
    return r;
  }
  std::string_view body = buffer_;
  if (body.substr(0, utf8_bom.size()) == utf8_bom)
    body.remove_prefix(utf8_bom.size());
  return format_ == wire_format::anthropic
           ? anthropic::parse_response(status_, body)
           : openai::parse_response(status_, body);
}

chat_response parse_body(wire_format format, int status,
                         std::string_view content_type,
                         std::string_view bytes) {
  response_decoder dec{format, status, content_type};
  dec.feed(bytes);
  return dec.finish();
}

} // namespace mibyan
