// File: kernels/cell_result.hpp
//
// Assembles the execute_code result object (docs/execute_code.md, "Result
// object") from what one cell produced. Pure: the spill file is written by
// the caller through `spill_writer`, so this stays testable without a
// kernel.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/json.hpp"

namespace mibyan {

/// How a cell ended, as the kernel actor saw it.
enum class cell_status {
  success,      // the runner replied "ok" (or exit 0)
  error,        // exception, non-zero sys.exit, or the kernel died
  timeout,      // the cell's wall clock ran out; the kernel was killed
  interrupted,  // interrupted on request; the kernel was killed
};

/// A value a restored checkpoint did not bring back.
struct lost_value {
  std::string name;
  std::string type;
  std::string reason;
};

/// What restoring a checkpoint into a fresh kernel gave
/// (docs/execute_code.md, "Checkpoints"); reported on the first cell.
struct restore_summary {
  /// A checkpoint was restored (perhaps partly).
  bool restored = false;
  /// Names back in the namespace.
  int64_t names = 0;
  /// Cells that ran after the checkpoint was taken, as far as the host
  /// knows.
  int64_t age_cells = 0;
  std::vector<lost_value> not_restored;
  /// Why a checkpoint was refused or failed as a whole ("" if not).
  std::string refused;
};

struct cell_outcome {
  cell_status status = cell_status::success;
  int64_t exit_code = 0;
  /// All stdout of the cell: Python-level first, then fd-level raw output.
  std::string stdout_text;
  /// Bytes of stdout produced in total (may exceed stdout_text.size() when
  /// the runner or the raw buffer already clipped).
  uint64_t stdout_total = 0;
  /// fd-level and Python-level stderr.
  std::string stderr_text;
  uint64_t stderr_total = 0;
  /// The traceback of an exception ("" for none).
  std::string traceback;
  /// Error message for timeout, interrupt, death or protocol errors.
  std::string error;
  /// Interrupt reason, shown in the marker.
  std::string interrupt_reason;
  int64_t tool_calls = 0;
  double duration_seconds = 0;
  // kernel info
  std::string mode = "session";
  bool reused = false;
  int64_t execution_count = 0;
  bool state_reset = false;
  bool ended = false;
  /// The tools the kernel's stub offers, for error hints.
  std::vector<std::string> tools;
  /// A note added to the result (e.g. the per-call fallback).
  std::string note;
  /// Set on the first cell of a kernel that restored, or tried to restore,
  /// a checkpoint.
  const restore_summary* restore = nullptr;
  /// Milliseconds this cell waited for the previous cell's checkpoint
  /// (0: it did not wait).
  double checkpoint_wait_ms = 0;
};

class redactor; // base/redact.hpp

struct cell_limits {
  uint64_t max_stdout_bytes = 50000;
  uint64_t max_stderr_bytes = 10000;
  uint64_t max_spill_bytes = 5000000;
  /// Redacts secrets from all output and the spill text; null means
  /// process_redactor().
  const redactor* redact = nullptr;
};

/// Writes the full (capped) stdout somewhere readable and returns its path,
/// or "" when the write failed.
using spill_writer = std::function<std::string(const std::string& text)>;

/// Builds the result object. ANSI sequences are stripped from all output
/// and secrets are redacted (inline text and spill alike).
json::value build_cell_result(const cell_outcome& c, const cell_limits& lim,
                              const spill_writer& spill);

/// Returns the hint for a traceback (docs/execute_code.md, "Traceback
/// hints"), or "".
std::string traceback_hint(const std::string& traceback,
                           const std::string& allowed_tools);

} // namespace mibyan
