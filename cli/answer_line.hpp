// File: cli/answer_line.hpp
//
// Reads one answer line from the terminal (stdin) for the interactive
// prompts (approval, clarify) without blocking past a deadline.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <string>

namespace mibyan::cli {

/// How reading an answer ended.
enum class answer_end {
  line,      ///< a full line was read (without its '\n')
  timeout,   ///< the deadline passed first
  cancelled, ///< `*cancelled` turned true first
  eof,       ///< stdin ended or failed: nobody can answer
};

/// Reads stdin byte by byte until '\n', polling every 100 ms so that the
/// deadline and `cancelled` (may be null) are noticed. Bytes beyond
/// `max_chars` are dropped. Blocks the calling thread: call it on a thread
/// that may wait (the approval and clarify channels run on pool threads).
answer_end read_answer_line(std::chrono::steady_clock::time_point deadline,
                            const std::atomic<bool>* cancelled,
                            size_t max_chars, std::string& line);

} // namespace mibyan::cli
