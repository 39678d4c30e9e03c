// File: base/sse_parser.hpp
//
// An incremental Server-Sent Events parser (WHATWG EventSource framing).
// Bytes go in as the network delivers them, split anywhere (inside a line,
// inside "\r\n", inside a UTF-8 sequence); complete events come out.
//
// Framing rules: lines end in CRLF, LF or CR; a UTF-8 BOM at the very start
// is skipped; lines starting with ':' are comments; "field: value" strips one
// space after the colon; `data` lines of one event are joined with '\n';
// `event` names the event ("message" when absent); `id` sets the last event
// id (kept across events, ignored when it contains NUL); `retry` sets the
// reconnection time; other fields are ignored. A blank line dispatches the
// event if it had a `data` field. `finish()` dispatches a final event that
// lacks its terminating blank line.
//
// Memory is bounded: a line or an event larger than `max_event_bytes` puts
// the parser into a failed state with an error message instead of growing.
//
// Thread safety: none; one owner feeds and reads.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mibyan {

/// One dispatched SSE event.
struct sse_event {
  /// The `event` field, "message" when the event had none.
  std::string event;
  /// The `data` lines joined with '\n'.
  std::string data;
  /// The last event id seen so far ("" when none).
  std::string id;
};

class sse_parser {
public:
  // -- constants -------------------------------------------------------------

  /// Default bound on one line and on one event's data (16 MiB).
  static constexpr size_t default_max_event_bytes = size_t{16} << 20;

  // -- constructors ----------------------------------------------------------

  explicit sse_parser(size_t max_event_bytes = default_max_event_bytes);

  // -- parsing ---------------------------------------------------------------

  /// Consumes `bytes` and appends every event they complete to `out`.
  /// Returns false when the parser is (or becomes) failed; events completed
  /// before the failure are still appended.
  bool feed(std::string_view bytes, std::vector<sse_event>& out);

  /// Ends the stream: a pending unterminated line is processed and a pending
  /// event without its blank line is dispatched (see
  /// `unterminated_final_event`). Further input is ignored. Returns false
  /// when the parser is failed.
  bool finish(std::vector<sse_event>& out);

  // -- observers -------------------------------------------------------------

  /// Returns whether an error stopped the parser.
  bool failed() const { return !error_.empty(); }

  /// Returns what stopped the parser ("" when nothing did).
  const std::string& error() const { return error_; }

  /// Returns the number of comment lines seen.
  uint64_t comments() const { return comments_; }

  /// Returns the number of events dispatched.
  uint64_t events() const { return events_; }

  /// Returns the number of bytes consumed by `feed`.
  uint64_t bytes() const { return bytes_; }

  /// Returns whether `finish` had to dispatch an event that lacked its
  /// terminating blank line.
  bool unterminated_final_event() const { return unterminated_; }

  /// Returns the last `retry` value in milliseconds, or -1 when none came.
  int64_t retry_ms() const { return retry_ms_; }

private:
  void process_line(std::string_view line, std::vector<sse_event>& out);
  void dispatch(std::vector<sse_event>& out);
  void fail(std::string msg);

  size_t max_event_bytes_;
  std::string line_;          // the current line, without its terminator
  std::string data_;          // data of the current event
  std::string event_type_;    // event field of the current event
  std::string last_id_;
  bool have_data_ = false;    // the current event had a data field
  bool after_cr_ = false;     // the previous byte ended a line with CR
  bool bom_checked_ = false;  // the first bytes were checked for a BOM
  std::string head_;          // first bytes kept until the BOM check
  bool finished_ = false;
  bool unterminated_ = false;
  uint64_t comments_ = 0;
  uint64_t events_ = 0;
  uint64_t bytes_ = 0;
  int64_t retry_ms_ = -1;
  std::string error_;
};

} // namespace mibyan
