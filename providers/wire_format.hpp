// File: providers/wire_format.hpp
//
// Choosing the codec for a response body: the wire format (OpenAI-compatible
// Chat Completions or Anthropic Messages) and the body kind (one JSON
// document or an SSE stream). A streaming request may be answered with a
// single JSON object and a JSON request with an event stream, so the kind
// is decided by the first significant bytes of the body ('{' or '[' means
// JSON, anything else SSE); the Content-Type only decides for a body that
// is empty or all whitespace.
//
// `response_decoder` is the incremental form (bytes as they arrive, for the
// provider actor); `parse_body` decodes a complete body.
//
// Thread safety: `response_decoder` has one owner; `parse_body` is pure.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "messages/chat.hpp"
#include "providers/anthropic_codec.hpp"
#include "providers/openai_codec.hpp"

namespace mibyan {

/// The provider API dialects Mibyan speaks.
enum class wire_format : uint8_t { openai, anthropic };

/// Returns "openai" or "anthropic".
const char* to_string(wire_format f);

/// Decodes one response body incrementally.
class response_decoder {
public:
  // -- member types ----------------------------------------------------------

  using fragment_callback = std::function<void(std::string_view)>;

  // -- constants -------------------------------------------------------------

  /// Default bound on a JSON body (error bodies and non-streamed answers).
  static constexpr size_t default_max_json_bytes = size_t{64} << 20;

  // -- constructors ----------------------------------------------------------

  /// `status` and `content_type` are those of the HTTP response. Non-2xx
  /// bodies are always buffered and decoded as error bodies.
  response_decoder(wire_format format, int status,
                   std::string_view content_type,
                   size_t max_json_bytes = default_max_json_bytes,
                   size_t max_event_bytes
                   = sse_parser::default_max_event_bytes);

  // -- callbacks (streams only; set before the first feed) -------------------

  void on_text(fragment_callback f) { on_text_ = std::move(f); }
  void on_reasoning(fragment_callback f) { on_reasoning_ = std::move(f); }

  // -- input -----------------------------------------------------------------

  /// Consumes the next bytes of the body.
  void feed(std::string_view bytes);

  /// Ends the body and returns the response. Call once.
  chat_response finish();

  // -- observers -------------------------------------------------------------

  /// Returns whether the body was recognised as an SSE stream (false while
  /// undecided or for JSON bodies).
  bool streaming() const { return mode_ == mode::sse; }

private:
  enum class mode : uint8_t { undecided, json, sse };

  void decide(bool at_end);
  void feed_sse(std::string_view bytes);

  wire_format format_;
  int status_;
  std::string content_type_;
  size_t max_json_bytes_;
  size_t max_event_bytes_;
  mode mode_ = mode::undecided;
  std::string buffer_; // undecided prefix, or the whole JSON body
  bool overflow_ = false;
  fragment_callback on_text_;
  fragment_callback on_reasoning_;
  std::unique_ptr<openai::stream_accumulator> openai_;
  std::unique_ptr<anthropic::stream_accumulator> anthropic_;
};

/// Decodes a complete response body (see the file comment).
chat_response parse_body(wire_format format, int status,
                         std::string_view content_type,
                         std::string_view bytes);

} // namespace mibyan
