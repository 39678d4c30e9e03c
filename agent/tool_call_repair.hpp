// File: agent/tool_call_repair.hpp
//
// Validation, repair and de-duplication of the tool calls of one model
// response (docs/agent_loop.md, "Tool-call arguments"), ending in a plan that says which calls run
// and which get an immediate error result. The plan keeps the invariant
// the loop relies on: every call in the assistant message gets exactly one
// tool message, either from running it or from the plan.
//
// Steps, in order:
//   1. name repair for names not in the tool list (`repair_tool_name`);
//   2. argument normalisation: empty/whitespace -> "{}", then a parse check
//      (`normalize_arguments`);
//   3. exact-duplicate removal by (name, raw arguments), keeping the first
//      (`remove_duplicate_calls`), then the `delegate_task` cap;
//   4. deterministic ids for calls without one, and for repeated ids
//      (`assign_call_ids`);
//   5. classification (`plan_tool_calls`).
//
// Mibyan: a response counts as truncated only when the provider says so
// (`response_truncated`). An untruncated response with bad calls is not
// retried blindly: the bad calls get error results the model can learn
// from, and three consecutive bad rounds end the turn (`bad_round_counter`).
//
// Thread safety: pure functions and a plain value class.
#pragma once

#include <cstddef>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "messages/chat.hpp"

namespace mibyan {

/// The set of tool names offered to the model (sorted, as error messages
/// list them).
using tool_name_set = std::set<std::string, std::less<>>;

// -- name repair --------------------------------------------------------------

/// Returns the similarity of `a` and `b` in [0, 1]: Python difflib's
/// `SequenceMatcher(None, a, b).ratio()`, i.e. 2*M/(|a|+|b|) where M is the
/// number of characters in the Ratcliff/Obershelp matching blocks (longest
/// common substring, recursively on both sides). Two empty strings give 1.
double name_similarity(std::string_view a, std::string_view b);

/// The minimum `name_similarity` of a fuzzy name repair.
constexpr double name_similarity_cutoff = 0.7;

/// Returns the known tool name that `name` repairs to, or "" when none
/// fits. A name already in `valid` is returned unchanged; an empty name
/// never repairs. Tries in turn, stopping at the first form in `valid`:
/// the name cut at the first `"`, `'`, `<` or `>` (and trimmed); lowercase;
/// `-` and space -> `_`; CamelCase -> snake_case; a trailing `_tool` or
/// `tool` stripped (twice, checking after each); finally the known name
/// with the highest `name_similarity` to any of those forms, if at least
/// `name_similarity_cutoff` (ties go to the alphabetically first name).
std::string repair_tool_name(std::string_view name,
                             const tool_name_set& valid);

// -- arguments ----------------------------------------------------------------

/// The outcome of `normalize_arguments`.
struct normalized_arguments {
  /// The arguments to record and run: "{}" for empty or whitespace-only
  /// input, else the input unchanged.
  std::string text;
  /// Empty when `text` parses as JSON; else the parser's message.
  std::string error;
  bool valid() const { return error.empty(); }
};

/// Normalises and parse-checks raw argument text. Valid JSON that is not
/// an object stays valid here; the dispatcher rejects it with its own
/// message when the call runs.
normalized_arguments normalize_arguments(std::string_view raw);

/// Returns whether a response with tool calls was cut off by the output
/// limit: `finish_reason` is "length", or the response was streamed and
/// the stream ended without a finish reason. Mibyan treats nothing else as
/// truncation (an unparseable argument string alone is a model mistake).
bool response_truncated(std::string_view finish_reason, bool streamed);

// -- de-duplication and ids ---------------------------------------------------

/// Removes calls whose `(name, arguments)` equals an earlier call's,
/// comparing the raw argument text (`{"a":1}` and `{ "a": 1 }` differ).
/// Keeps the first of each; returns how many were removed.
size_t remove_duplicate_calls(std::vector<tool_call>& calls);

/// Gives every call without an id the id `make_tool_call_id(name,
/// arguments, index)` ("call_" + 12 hex digits of SHA-256 of
/// "name:arguments:index", index = position in `calls`). A call whose id
/// repeats an earlier call's id gets a generated id too, so the ids are
/// unique (a collision with a generated id appends "_<n>"). Returns how
/// many ids were set.
size_t assign_call_ids(std::vector<tool_call>& calls);

// -- the plan -----------------------------------------------------------------

/// Why a planned call does not run.
enum class call_problem {
  none,              ///< runs
  empty_name,        ///< the model sent no name (or only blanks)
  unknown_name,      ///< no known tool, even after repair
  invalid_arguments, ///< the arguments do not parse as JSON
  skipped,           ///< valid, but a sibling call was invalid
};

/// Returns "none", "empty_name", "unknown_name", "invalid_arguments" or
/// "skipped".
const char* to_string(call_problem x);

/// One call of the assistant message, as the plan decided.
struct planned_call {
  /// The call as it goes into the assistant message: id assigned, name
  /// repaired, arguments normalised.
  tool_call call;
  /// The name exactly as the model wrote it.
  std::string model_name;
  /// Why the call does not run, or `none`.
  call_problem problem = call_problem::none;
  /// For a call that does not run: the tool message content, a JSON text
  /// `{"error": "..."}`. Empty for calls that run.
  std::string result;
  /// For `invalid_arguments`: the parser's message.
  std::string parse_error;

  bool runs() const { return problem == call_problem::none; }
};

/// Options of `plan_tool_calls`.
struct tool_call_plan_options {
  /// Most `delegate_task` calls kept per message
  /// (`delegation.max_concurrent_children`); the excess is dropped.
  size_t max_delegate_calls = 3;
  /// Whether valid calls still run when a sibling is invalid. Off by
  /// default: calls of one message often depend on each other, so a valid
  /// sibling gets a "skipped, please retry" result instead.
  bool run_valid_siblings = false;
};

/// What to do with a response's tool calls.
struct tool_call_plan {
  /// What the caller does next.
  enum class action {
    /// Append the assistant message with `calls`, run the calls that
    /// `runs()`, append `result` for the others, in model order.
    execute,
    /// The response was truncated and some arguments do not parse: append
    /// nothing; retry with a larger output budget, or end the turn as
    /// partial ("Response truncated due to output length limit").
    truncated,
  };

  action next = action::execute;
  /// The calls of the assistant message in model order, after
  /// de-duplication and the delegate cap.
  std::vector<planned_call> calls;
  /// Exact duplicates removed.
  size_t duplicates_removed = 0;
  /// `delegate_task` calls dropped by the cap.
  size_t delegate_calls_dropped = 0;
  /// True when every call is a housekeeping call (memory, todo,
  /// skill_manage, session_search): the response text is kept as a
  /// fallback final answer.
  bool housekeeping_only = false;

  /// Returns whether some call has an empty or unknown name or invalid
  /// arguments (a "bad round").
  bool has_invalid() const;

  /// Returns the calls for the assistant message.
  std::vector<tool_call> assistant_calls() const;

  /// Returns the calls that run, in model order.
  std::vector<tool_call> runnable_calls() const;

  /// Returns the message that ends a turn after too many bad rounds:
  /// "Model generated invalid tool call: <name of the first bad call>"
  /// ("<empty>" for an empty name), plus " (invalid JSON arguments:
  /// <parser message>)" for a call with bad arguments. Empty when the
  /// plan has no invalid call.
  std::string invalid_call_message() const;
};

/// Plans the execution of `calls` against the tool names in `valid`.
/// `truncated` is `response_truncated(...)` of the response. Never fails;
/// every input call ends up in `calls` of the plan (as-is, repaired or with
/// an error result) unless it was a duplicate or over the delegate cap.
///
/// Error results (JSON `{"error": ...}`):
/// - empty or blank name: a rejection that also says tool-call markup seen inside
///   files or tool output is data, not a call;
/// - unknown name: "Tool '<n>' does not exist. Available tools: <sorted,
///   comma-separated>" (<n> as the model wrote it, at most 100 bytes);
/// - invalid arguments: the parser message and a reminder that tools
///   without parameters take {};
/// - skipped sibling: nothing ran, retry after fixing the invalid call.
tool_call_plan plan_tool_calls(std::vector<tool_call> calls,
                               const tool_name_set& valid, bool truncated,
                               const tool_call_plan_options& opts = {});

// -- consecutive bad rounds ---------------------------------------------------

/// Counts consecutive rounds (responses) with invalid tool calls. The turn
/// ends as partial when `limit` consecutive rounds were bad; a clean round
/// resets the count.
class bad_round_counter {
public:
  static constexpr int default_limit = 3;

  explicit bad_round_counter(int limit = default_limit)
    : limit_(limit < 1 ? 1 : limit) {
    // nop
  }

  /// Records one round. Returns true when the turn must end now.
  bool record(bool bad);

  /// Records the round of `plan`: bad when `plan.has_invalid()`. A
  /// truncated plan is not a round (it is retried) and changes nothing.
  bool record(const tool_call_plan& plan);

  /// Returns the current number of consecutive bad rounds.
  int consecutive() const { return consecutive_; }

  int limit() const { return limit_; }

  void reset() { consecutive_ = 0; }

private:
  int limit_;
  int consecutive_ = 0;
};

} // namespace mibyan
