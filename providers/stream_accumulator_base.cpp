// File: providers/stream_accumulator_base.cpp
#include "providers/stream_accumulator_base.hpp"

#include <utility>

#include "providers/codec_support.hpp"
#include "providers/provider_error.hpp"
#include "base/strings.hpp"

namespace mibyan {

stream_accumulator_base::stream_accumulator_base(size_t max_event_bytes)
  : parser_(max_event_bytes) {
  // nop
}

stream_accumulator_base::~stream_accumulator_base() {
  // nop
}

void stream_accumulator_base::add(const sse_event& ev) {
  if (finished_ || fatal_)
    return;
  auto data = strings::trim_view(ev.data, strings::ascii_space);
  if (data.empty())
    return; // keep-alive "data:" without payload
  add_data(data, ev.event);
}

void stream_accumulator_base::feed(std::string_view bytes) {
  if (finished_)
    return;
  parser_.feed(bytes, pending_);
  dispatch_pending();
}

void stream_accumulator_base::end_input() {
  if (finished_)
    return;
  parser_.finish(pending_);
  dispatch_pending();
  finished_ = true;
}

void stream_accumulator_base::dispatch_pending() {
  for (const auto& ev : pending_)
    add(ev);
  pending_.clear();
  if (parser_.failed())
    set_error("malformed event stream: " + parser_.error(), false);
}

void stream_accumulator_base::set_error(std::string msg, bool retryable) {
  if (!error_.empty())
    return; // the first error explains the failure
  error_ = std::move(msg);
  retryable_ = retryable;
}

void stream_accumulator_base::set_fatal(std::string msg) {
  set_error(std::move(msg), true);
  fatal_ = true;
}

void stream_accumulator_base::add_text(std::string& into, std::string_view s,
                                       bool visible) {
  if (s.empty())
    return;
  into.append(s.data(), s.size());
  if (visible && on_text_)
    on_text_(s);
}

void stream_accumulator_base::add_reasoning(std::string& into,
                                            std::string_view s) {
  if (s.empty())
    return;
  into.append(s.data(), s.size());
  if (on_reasoning_)
    on_reasoning_(s);
}

bool stream_accumulator_base::take_error(chat_response& r, int http_status) {
  if (!success_status(http_status) && error_.empty())
    set_error("HTTP " + std::to_string(http_status)
                + ": the provider answered with an event stream",
              retryable_status(http_status));
  if (error_.empty())
    return false;
  r.error = error_;
  r.retryable = retryable_;
  return true;
}

} // namespace mibyan
