// File: agent/tool_output_pruning.hpp
//
// Old tool outputs before a compression's summary call (docs/agent_loop.md,
// "Old tool outputs before compression"): the last `keep_last` tool results
// of the summarised messages stay whole; every older one longer than
// `min_chars` characters is replaced by a one-line stub naming its tool and
// size, e.g.
//   [tool output pruned: read_file returned 48,213 characters]
// The summariser still sees that the call happened and what it was called
// with (the assistant's tool calls are untouched); the history the
// conversation keeps is not changed, only the summary request's copy.
//
// Pure functions; any thread.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "messages/chat.hpp"

namespace mibyan {

struct prune_stats {
  /// Tool results replaced by a stub.
  size_t pruned = 0;
  /// Characters (bytes) of tool-result content before and after.
  size_t bytes_before = 0;
  size_t bytes_after = 0;
};

/// The stub for a result of `tool` that was `size` bytes long.
std::string pruned_output_stub(const std::string& tool, size_t size);

/// Prunes `msgs` in place (see the file comment). A tool message without a
/// tool name takes the name of the call it answers, found in the assistant
/// messages before it; "a tool" when none is found.
prune_stats prune_old_tool_outputs(std::vector<chat_message>& msgs,
                                   size_t keep_last, size_t min_chars);

} // namespace mibyan
