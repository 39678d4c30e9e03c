// File: agent/tool_result_shaping.hpp
//
// What happens to tool results between the tool and the transcript
// (docs/tools.md, "Result size"):
//
//   1. per result: a result longer than the threshold (default 100,000) is
//      saved through a caller-supplied writer and replaced by a
//      <persisted-output> block with a preview; `read_file` results are
//      never persisted (the model would read them back in a loop);
//   2. per batch: when the results of one batch together exceed the
//      aggregate cap (default 200,000), the largest are spilled the same
//      way until the batch fits;
//   3. results of tools that return outside content (web_search,
//      web_extract, browser_*, MCP tools named mcp__<server>__<tool>) of
//      32 characters or more are wrapped in <untrusted_tool_result> with a
//      one-line preface; delimiters inside the content are defanged.
//
// Sizes are counted in bytes of UTF-8 text (the text shown to the model
// says "characters"); cuts never split a UTF-8 sequence.
//
// Thread safety: pure functions; the writer is called on the calling
// thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace mibyan {

/// Saves the full text of an oversized result (the conversation keeps them
/// under `$MIBYAN_HOME/cache/results/<session>/`) and returns the path, or
/// "" when it could not be saved.
using result_writer =
  std::function<std::string(const std::string& call_id, std::string_view text)>;

/// Size limits of result shaping.
struct shaping_limits {
  /// Layer 2: a single result longer than this is persisted.
  size_t persist_threshold = 100000;
  /// Layer 3: the most characters of one batch's results together.
  size_t batch_budget = 200000;
  /// Characters of the preview inside a <persisted-output> block.
  size_t preview_chars = 1500;
};

/// Returns the limits for a model with a context window of
/// `context_tokens`: the defaults, lowered for small windows to 15 % and
/// 30 % of `context_tokens * 4` characters, floored at 8,000 and 16,000.
/// `context_tokens <= 0` means unknown and gives the defaults.
shaping_limits limits_for_context(int64_t context_tokens);

/// Minimum size of a result that gets the untrusted wrapper.
constexpr size_t untrusted_min_chars = 32;

/// Returns whether results of tool `name` carry untrusted outside content:
/// web_search, web_extract, browser_* and mcp__* tools.
bool is_untrusted_tool(std::string_view name);

/// Returns `content` with every `<untrusted_tool_result` and
/// `</untrusted_tool_result` (ASCII case-insensitive) made inert by
/// replacing its `<` with `&lt;`.
std::string defang_untrusted_delimiters(std::string_view content);

/// Returns `content` wrapped for the transcript when `tool` is untrusted
/// and `content` has at least `untrusted_min_chars` bytes, else `content`
/// unchanged. The wrapped form is a one-line preface, then
/// `<untrusted_tool_result source="<tool>">`, the defanged content and
/// `</untrusted_tool_result>` on their own lines.
std::string wrap_untrusted(std::string_view tool, std::string_view content);

/// Returns the <persisted-output> block that replaces `content` after it
/// was saved at `path`: the original size in characters and KB, the path,
/// how to page it with read_file, and the first `preview_chars` of it.
std::string persisted_output_block(std::string_view content,
                                   const std::string& path,
                                   size_t preview_chars);

/// Returns `content` cut to at most `keep` bytes plus a one-line note
/// giving the original length (used when saving failed).
std::string truncate_inline(std::string_view content, size_t keep);

/// One tool result on its way to the transcript.
struct shaped_result {
  std::string tool_name;
  std::string call_id;
  std::string content;
  /// Set once the content was replaced by a <persisted-output> block or
  /// truncated inline; such results are not spilled again.
  bool persisted = false;
};

/// Layer 2 for one result: persists `r.content` when it is longer than
/// `limits.persist_threshold` and the tool is not read_file. When `write`
/// is null or returns "", the content is truncated inline to the
/// threshold instead. Returns whether the content changed.
bool persist_if_large(shaped_result& r, const shaping_limits& limits,
                      const result_writer& write);

/// Layer 3 for one batch: while the batch is over `limits.batch_budget`,
/// spills the largest result not yet persisted (never read_file; ties go to
/// the earlier result). A failed write truncates that result inline to
/// what the budget allows (at least `preview_chars`). Returns how many
/// results were spilled.
size_t enforce_batch_budget(std::vector<shaped_result>& batch,
                            const shaping_limits& limits,
                            const result_writer& write);

/// Returns whether shape_tool_results(batch, limits, ...) could call its
/// writer: some result is over `limits.persist_threshold` or the batch is
/// over `limits.batch_budget`. When false, shaping does no I/O and takes
/// microseconds (the conversation then shapes on its own thread).
bool shaping_may_write(const std::vector<shaped_result>& batch,
                       const shaping_limits& limits);

/// Runs layer 2 on every result, then layer 3 on the batch, then wraps
/// untrusted results. The vector keeps model order.
void shape_tool_results(std::vector<shaped_result>& batch,
                        const shaping_limits& limits,
                        const result_writer& write);

} // namespace mibyan
