// File: agent/tool_guardrails.hpp
//
// Tool-loop guardrails of one turn (docs/configuration.md,
// `tool_loop_guardrails`). One instance per turn watches the model's direct
// tool calls (script calls from execute_code never pass through the turn,
// so they are exempt by construction) and counts:
//
//   trigger                                    warn after   hard stop after
//   the identical call (tool + canonical,
//     sorted-key arguments) failing               2           5 (block)
//   the same tool failing in a row                3           8 (halt)
//   a read-only tool (read_file, search_files,
//     web_search, web_extract) returning the
//     same result for the identical call          2           5 (block)
//
// Warnings append a "[tool-loop guardrail] ..." paragraph to the result
// text. Blocks and halts apply only with `hard_stop_enabled`: a blocked call
// is not run and gets a BLOCKED error result instead; a halt ends the turn
// after the current batch with exit `guardrail_halt` and halt_message() as
// its final response.
//
// A result counts as a failure when it is a JSON object with a non-null
// "error", "success": false, or "status" "error"/"blocked"/"timeout". A
// success of the same call (or tool) resets its failure count.
//
// Thread safety: none (owned by one turn of one conversation actor).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "config/options.hpp"

namespace mibyan {

/// Returns the call's key: SHA-256 hex of `tool` NUL canonical arguments
/// (objects with sorted keys, compact; unparseable text as is).
std::string guardrail_call_key(std::string_view tool,
                               std::string_view args_json);

/// Whether `result_json` reports a failure (see the file comment).
bool is_failed_tool_result(std::string_view result_json);

/// Whether `tool` is read-only and idempotent for the repeat guard.
bool is_idempotent_tool(std::string_view tool);

class tool_guardrails {
public:
  tool_guardrails() = default;
  explicit tool_guardrails(const tool_loop_guardrail_options& opts);

  /// Called before a call runs. Returns the result to use instead of
  /// running it (a BLOCKED error), or nullopt to run it.
  std::optional<std::string> before_call(std::string_view tool,
                                         std::string_view args_json);

  /// Called with the call's result; returns the result to hand to the
  /// model (with a warning appended when a warn threshold is reached).
  /// May set halted().
  std::string after_call(std::string_view tool, std::string_view args_json,
                         std::string result_json);

  /// A hard stop was reached: end the turn after this batch.
  bool halted() const { return halted_; }

  /// The final response for a halted turn.
  const std::string& halt_message() const { return halt_message_; }

private:
  struct call_stats {
    int64_t failures = 0;      // consecutive failures of this call
    std::string last_hash;     // idempotent tools: hash of the last result
    int64_t repeats = 0;       // times the last result came back
  };

  tool_loop_guardrail_options opts_;
  std::map<std::string, call_stats> calls_;
  std::map<std::string, int64_t> tool_failures_; // consecutive, per tool
  bool halted_ = false;
  std::string halt_message_;
};

} // namespace mibyan
