// File: storage/batch_run.hpp
//
// The on-disk side of `mibyan batch` (docs/batch.md): the prompts file, one
// durable file per finished sample, the checkpoint, the merge into
// `trajectories.jsonl` with its filters, and the run statistics. The CLI
// (cli/batch_command.cpp) drives the turns; everything here is plain data
// and file I/O with no runtime in sight, so a merge can be redone from the
// files alone.
//
// Layout of a run directory `$MIBYAN_HOME/batch/<run>/`:
//   run.json            the run's identity: prompts file, its hash, the
//                       total, the known tool names (written once)
//   samples/<i>.json    one finished sample per prompt index (atomic: temp
//                       file, fsync, rename, fsync of the directory). The
//                       set of these files IS the checkpoint: a sample that
//                       exists is done, everything else is re-run.
//   checkpoint.json     a human-readable summary of the above (completed
//                       and in-flight indices), rewritten atomically
//   errors.jsonl        one line per turn that could not produce a sample
//   trajectories.jsonl  the merge of every valid sample, in prompt order
//   stats.json          the statistics of the merge
//
// Thread safety: free functions without shared state; `write_sample` may
// run on several threads at once for different indices. Blocking file I/O.
// Nothing throws (bad files are reported in the results).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/json.hpp"
#include "base/status.hpp"
#include "mibyan/turn.hpp"

namespace mibyan::batch {

/// One usable line of the prompts file.
struct prompt_entry {
  /// 0-based line number in the file: the sample's key (stable while the
  /// file is unchanged; `run.json` keeps the file's hash to check that).
  uint64_t index = 0;
  std::string prompt;
  /// The line's other members, kept on the sample as metadata.
  json::value metadata = json::value::make_object();
};

/// The prompts file, read.
struct prompt_file {
  std::vector<prompt_entry> prompts;
  /// One message per unusable line, "line N: why" (1-based N). Blank
  /// lines are skipped silently.
  std::vector<std::string> bad_lines;
  /// FNV-1a 64 of the whole file, as 16 hex digits.
  std::string hash;
};

/// Reads a JSONL prompts file: each line a JSON object with a non-empty
/// string `prompt`. Other lines are reported in `bad_lines`, never fatal.
/// Fails only when the file cannot be read at all (the errno's code;
/// invalid_argument for a non-regular file).
result<prompt_file> load_prompts(const std::string& path);
/// The same from text already in memory (used by the fuzz target).
prompt_file parse_prompts(std::string_view text);

/// Tool statistics of one tool (or of a whole run).
struct tool_counts {
  int64_t count = 0;
  int64_t success = 0;
  int64_t failure = 0;
};

/// Returns whether a tool result text counts as a failure: its JSON object
/// has a non-null `error` (also inside a nested `content` object) or
/// `"success": false`; a non-JSON result fails when empty or when it
/// starts with "error:". Non-zero exit codes are not failures.
bool tool_result_failed(std::string_view content);

/// Builds the sample record of one finished turn from its result object
/// (docs/agent_loop.md, "Turn result") and the sample's ShareGPT
/// conversation (`trajectory_line` of storage/trajectory.hpp, parsed):
/// {"prompt_index","conversations","metadata":{...prompt metadata,
/// "run_name","timestamp","model"},"completed","partial","api_calls",
/// "turns","tool_stats":{name:{count,success,failure}},"tool_names":[...],
/// "bad_arguments":N,"tokens":{"input","output","total"},"duration_ms",
/// "exit_reason"}. `bad_arguments` counts tool calls whose argument text
/// is not a JSON object.
/// `exit_reason` is the turn's detailed exit text (turn_exit_reason of
/// agent/turn_result.hpp).
json::value make_sample(const prompt_entry& p, const std::string& run_name,
                        const turn_result& result,
                        const std::string& exit_reason,
                        json::value conversations, int64_t duration_ms);

/// The run's paths.
struct run_paths {
  std::string dir;
  std::string samples_dir() const { return dir + "/samples"; }
  std::string sample_file(uint64_t index) const;
  std::string run_file() const { return dir + "/run.json"; }
  std::string checkpoint_file() const { return dir + "/checkpoint.json"; }
  std::string errors_file() const { return dir + "/errors.jsonl"; }
  std::string trajectories_file() const {
    return dir + "/trajectories.jsonl";
  }
  std::string stats_file() const { return dir + "/stats.json"; }
};

/// Returns the directory of run `name` under `home` ("<home>/batch/<name>").
/// Fails with invalid_argument for a name that is empty, longer than 128
/// characters, or not made of [A-Za-z0-9._-] (or starts with '.'), and
/// with config_invalid when `home` is empty.
result<std::string> run_dir(const std::string& home, const std::string& name);

/// Writes `data` to `path` durably: a temporary file in the same
/// directory, fsync, rename over `path`, fsync of the directory. A crash
/// leaves either the old file or the new one. Fails with the errno's code.
status write_atomic(const std::string& path, const std::string& data);

/// Writes the sample of `index` (its JSON text) durably (`write_atomic`).
status write_sample(const run_paths& rp, uint64_t index,
                    const std::string& sample_json);

/// Returns the indices that have a sample file (the done set). Leftover
/// temporary files of an interrupted write are removed.
std::set<uint64_t> completed_samples(const run_paths& rp);

/// Appends one error record {"prompt_index","kind","error"} to
/// errors.jsonl (one O_APPEND write, then fdatasync). Fails with the
/// errno's code.
status append_error(const run_paths& rp, uint64_t index,
                    const std::string& kind, const std::string& text);

/// What a merge found.
struct merge_result {
  int64_t samples = 0;          ///< sample files read
  int64_t written = 0;          ///< lines in trajectories.jsonl
  int64_t invalid_json = 0;     ///< unparseable sample, or a tool call
                                ///< whose arguments were not a JSON object
  int64_t invalid_tool_name = 0;///< called a tool not in the known set
  json::value stats = json::value::make_object();
};

/// Merges every sample of the run, in prompt-index order, into
/// trajectories.jsonl (written atomically), dropping samples with invalid
/// JSON or unknown tool names (`known_tools`), and computes the statistics
/// (turns, tool calls by name, errors from errors.jsonl by kind, tokens,
/// durations, filtered counts, `bad_prompt_lines`). Writes stats.json.
/// Fails with the errno's code when trajectories.jsonl or stats.json
/// cannot be written.
result<merge_result> merge_run(const run_paths& rp,
                               const std::string& run_name,
                               const std::set<std::string>& known_tools,
                               int64_t total_prompts,
                               int64_t bad_prompt_lines,
                               double wall_seconds);

/// Renders the statistics object of `merge_run` as a plain-text table.
std::string summary_table(const json::value& stats);

} // namespace mibyan::batch
