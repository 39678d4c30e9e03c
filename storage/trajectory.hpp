// File: storage/trajectory.hpp
//
// Trajectory samples (docs/storage.md, "Trajectories"): a finished turn
// rendered as one ShareGPT-style JSON line and appended to
// `trajectory_samples.jsonl` (completed turns) or
// `failed_trajectories.jsonl` (all others).
//
//   {"conversations":[{"from":"system","value":...},{"from":"human",...},
//                     {"from":"gpt",...},{"from":"tool",...},...],
//    "timestamp":"2026-08-08T12:00:00","model":"m","completed":true}
//
// `system` is a fixed function-calling preamble listing the tools (never
// the live system prompt); `gpt` values are "<think>\n...\n</think>\n",
// the visible text, then one "<tool_call>\n{name,arguments}\n</tool_call>"
// per call; all tool results after one assistant message merge into one
// `tool` entry of "<tool_response>\n{tool_call_id,name,content}\n
// </tool_response>" blocks joined by "\n".
//
// Thread safety: pure functions; `append_trajectory_line` may be called
// from several threads and processes at once (one O_APPEND write per line).
// Nothing throws.
#pragma once

#include <ctime>
#include <string>
#include <vector>

#include "base/json.hpp"
#include "base/status.hpp"

namespace mibyan {

/// A tool as the preamble lists it.
struct trajectory_tool {
  std::string name;
  std::string description;
  /// The tool's JSON schema for its arguments.
  json::value parameters;
};

/// The file names (docs/storage.md, "Trajectories").
constexpr const char* trajectory_samples_file = "trajectory_samples.jsonl";
constexpr const char* failed_trajectories_file = "failed_trajectories.jsonl";

/// Returns the fixed system preamble listing `tools` (in the given order).
std::string trajectory_system_prompt(const std::vector<trajectory_tool>& tools);

/// Converts "<REASONING_SCRATCHPAD>" tags in `text` to "<think>" tags.
std::string convert_scratchpad_tags(std::string text);

/// Builds the sample object from `messages` (OpenAI chat format as in
/// agent/turn_result.hpp `turn_message_json`: role, content, tool_calls,
/// tool_call_id, name, reasoning). System messages are skipped (the
/// preamble replaces them). `when` is rendered in local time.
json::value make_trajectory(const json::value& messages,
                            const std::vector<trajectory_tool>& tools,
                            const std::string& model, bool completed,
                            std::time_t when);

/// Builds the sample from a turn result object (docs/agent_loop.md, "Turn result": uses
/// "messages", "model", "completed"). Returns the compact JSON line
/// without the trailing newline.
std::string trajectory_line(const json::value& turn_result,
                            const std::vector<trajectory_tool>& tools,
                            std::time_t when);

/// Appends `line` + "\n" to `dir`/`file` in a single O_APPEND write.
/// Creates `dir` (mode 0700, parents included) and the file (mode 0600)
/// when missing. `dir` "" means the current directory. Fails with a
/// message naming the path and the cause: invalid_argument for a bad file
/// name, a line with a newline or a non-directory `dir`, else the errno's
/// code (resource_exhausted for a short write).
status append_trajectory_line(const std::string& dir,
                              const std::string& file,
                              const std::string& line);

} // namespace mibyan
