// File: providers/stream_accumulator_base.hpp
//
// The format-neutral half of a streamed (SSE) response accumulator: the
// `sse_parser` that turns raw body bytes into events, the text and
// reasoning callbacks, and the error state. Each wire format derives from
// it (`openai::stream_accumulator`, `anthropic::stream_accumulator`),
// handles one event's data in `add_data` and builds the response in its
// own `finish`.
//
// Error contract: nothing here throws. The first error recorded with
// `set_error` explains the failure; later ones are dropped. A fatal error
// (`set_fatal`) also makes every later event be ignored.
//
// Thread safety: none; one owner. Callbacks run synchronously inside
// `add`/`feed`.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "messages/chat.hpp"
#include "base/sse_parser.hpp"

namespace mibyan {

class stream_accumulator_base {
public:
  // -- member types ----------------------------------------------------------

  /// Receives each fragment as it arrives.
  using fragment_callback = std::function<void(std::string_view)>;

  // -- constructors ----------------------------------------------------------

  virtual ~stream_accumulator_base();

  // -- callbacks -------------------------------------------------------------

  /// Called with every visible text fragment while no tool call has started.
  void on_text(fragment_callback f) { on_text_ = std::move(f); }

  /// Called with every reasoning fragment.
  void on_reasoning(fragment_callback f) { on_reasoning_ = std::move(f); }

  // -- input -----------------------------------------------------------------

  /// Consumes one SSE event. Events without data (keep-alives) and events
  /// after the end of input or after a fatal problem are ignored; the
  /// trimmed data of the others goes to `add_data`.
  void add(const sse_event& ev);

  /// Consumes raw body bytes through an internal `sse_parser`. A framing
  /// failure (an over-long line or event) becomes a non-retryable error.
  void feed(std::string_view bytes);

  // -- observers -------------------------------------------------------------

  /// Returns whether the format's end-of-stream marker arrived.
  bool done() const { return done_; }

  /// Returns whether an error already decided the outcome.
  bool failed() const { return !error_.empty(); }

protected:
  /// `max_event_bytes` bounds one SSE event when bytes are fed with `feed`.
  explicit stream_accumulator_base(size_t max_event_bytes);

  /// Handles the non-empty, trimmed `data` of one event named `event`.
  virtual void add_data(std::string_view data, const std::string& event) = 0;

  /// Ends the input (first call only): dispatches what the parser still
  /// holds; later `add`/`feed` calls are ignored.
  void end_input();

  /// Records `msg` unless an error is already recorded.
  void set_error(std::string msg, bool retryable);

  /// Records a retryable `msg` (see `set_error`) and ignores later events.
  void set_fatal(std::string msg);

  /// Records an error for a non-2xx `http_status` unless one is recorded,
  /// then copies the recorded error into `r`. Returns whether there was one.
  bool take_error(chat_response& r, int http_status);

  /// Appends a non-empty `s` to `into` and passes it to the text callback
  /// when `visible`.
  void add_text(std::string& into, std::string_view s, bool visible);

  /// Appends a non-empty `s` to `into` and passes it to the reasoning
  /// callback.
  void add_reasoning(std::string& into, std::string_view s);

  fragment_callback on_text_;
  fragment_callback on_reasoning_;
  bool done_ = false;

private:
  // Hands the parsed events to `add`; records a parser failure.
  void dispatch_pending();

  sse_parser parser_;
  std::vector<sse_event> pending_;
  bool finished_ = false;
  bool fatal_ = false; // malformed input: later events are ignored
  std::string error_;
  bool retryable_ = false;
};

} // namespace mibyan
