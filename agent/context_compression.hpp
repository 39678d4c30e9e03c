// File: agent/context_compression.hpp
//
// The pure part of context compression (docs/agent_loop.md, "Context
// compression"): the context window of a model, the threshold, a token
// estimate, and where to cut a history into a protected head, a middle to
// summarise and a protected tail without splitting a tool call from its
// results. The conversation actor makes the summary call and rotates the
// session.
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "messages/chat.hpp"

namespace mibyan {

/// The window of `model` in tokens: `configured` when > 0, else a size
/// known for the model family, else 128000.
int64_t context_window(std::string_view model, int64_t configured);

/// Tokens at which to compress: max((window - max_tokens) * ratio, 64000)
/// with ratio at least 0.75 for a window under 512K; 85 % of the window
/// when that reaches the usable window.
int64_t compression_threshold(int64_t window, int64_t max_tokens,
                              double ratio);

/// A rough token count: characters / 4 over contents, reasoning, tool-call
/// names and arguments, plus `extra_chars` (the tool schemas).
int64_t estimate_tokens(const std::vector<chat_message>& msgs,
                        size_t extra_chars = 0);

/// Where to cut `msgs` (the history without the system prompt).
struct compression_cut {
  /// msgs[0, head_end) stay verbatim.
  size_t head_end = 0;
  /// msgs[tail_begin, end) stay verbatim; the middle is summarised.
  size_t tail_begin = 0;
  /// True when there is a middle of at least two messages to summarise.
  bool worthwhile() const { return tail_begin >= head_end + 2; }
};

/// Chooses the cut: the first `protect_first_n` messages (extended over
/// the results of a tool call they end with), and a tail of at least
/// `protect_last_n` messages grown backwards while it fits `tail_tokens`;
/// a tail never starts with a tool result (it then starts at the
/// assistant message that made the call).
compression_cut choose_cut(const std::vector<chat_message>& msgs,
                           size_t protect_first_n, size_t protect_last_n,
                           int64_t tail_tokens);

/// Prefix that marks a compaction summary in the history.
extern const char* const compaction_marker;

/// The instructions for the summarising call.
extern const char* const summarizer_system_prompt;

/// The user message of the summarising call: the middle as a transcript
/// (tool outputs cut to a few thousand characters each). A previous
/// summary in it is named, so the new summary updates it.
std::string summarizer_request(const std::vector<chat_message>& middle);

/// The history after compression: head, one summary message (role chosen
/// so it does not repeat the role before it), tail.
std::vector<chat_message> compacted_history(
  const std::vector<chat_message>& msgs, const compression_cut& cut,
  const std::string& summary);

} // namespace mibyan
