// File: cli/tool_lines.hpp
//
// The line protocol of `mibyan tool --stdin` (docs/configuration.md): one
// request line {"tool": NAME, "args": {...}} in, one result line out, the
// Nth output line answering the Nth input line, one call at a time.
//
//   * `parse_tool_line` and `too_long_tool_line`: what a line asks for, or
//     the error result that answers it. Pure.
//   * `serve_tool_lines_on_io_loop`: the whole protocol with the input read
//     by the runtime's I/O thread (the middleman's event loop, where the
//     kernels live), so a warm cell costs the client no extra thread
//     wake-up (docs/benchmarks-history.md, "Fourth round").
//     Only for a pipe or a socket: the loop cannot poll regular files, and
//     the caller reads anything else itself with the functions above.
//
// CAF-free header; the loop lives in cli/tool_lines_loop.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/runtime.hpp"

namespace mibyan {

struct tool_line_settings {
  std::string session;
  std::string cwd;
  /// tools.max_argument_bytes.
  int64_t max_argument_bytes = 0;
};

/// The longest request line kept (the arguments' limit plus room for the
/// envelope); longer lines are answered with `too_long_tool_line`.
size_t max_tool_line_bytes(const tool_line_settings& s);

/// One request line: the call to make, or (no call) the result line that
/// answers it.
struct tool_line {
  std::optional<tool_call_request> call;
  std::string answer;
};

/// Line `seq` (1-based) of the input, without its '\n'.
tool_line parse_tool_line(std::string_view line, uint64_t seq,
                          const tool_line_settings& s);

/// The answer to line `seq`, which had `length` bytes (over the cap).
std::string too_long_tool_line(uint64_t seq, uint64_t length,
                               const tool_line_settings& s);

/// Writes `line` (with its '\n') to `fd` when that cannot block: the line
/// is at most PIPE_BUF bytes and the pipe or socket takes it now
/// (RWF_NOWAIT), or, for other files, `poll` says writable. False when
/// nothing was written (the caller writes it later), or on a write error.
bool write_line_if_ready(int fd, const std::string& line);

/// Writes all of `text` to `fd`, blocking; false on an error.
bool write_all_to(int fd, const std::string& text);

/// Runs the protocol from `in_fd` to `out_fd` until the input ends and the
/// last answer is written; returns the exit status (0). Blocks the calling
/// thread, which only writes the answers the I/O thread cannot write
/// without blocking. Nothing (and `in_fd` untouched) when `in_fd` is not a
/// pipe or socket or the runtime's event loop cannot take it. `in_fd` is
/// non-blocking while this runs (the flag belongs to the open file
/// description) and is restored before it returns.
std::optional<int> serve_tool_lines_on_io_loop(runtime& rt, int in_fd,
                                               int out_fd,
                                               const tool_line_settings& s);

} // namespace mibyan
