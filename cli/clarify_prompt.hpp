// File: cli/clarify_prompt.hpp
//
// The terminal clarify channel of `mibyan chat` (docs/tools.md, "clarify"):
// prints the model's question and its numbered choices, reads one answer
// line from stdin. A number picks that choice; any other text is the
// answer. End of input, a timeout or a cancelled call answer "".
#pragma once

#include <mutex>
#include <string>

#include "mibyan/clarify.hpp"

namespace mibyan::cli {

/// Asks on the terminal. `out_mtx` serialises writes to stdout with the
/// chat's streaming output. Reads fd 0 directly: call only while the main
/// thread is not reading stdin (it waits for the turn).
std::string ask_clarify_on_terminal(const clarify_prompt& prompt,
                                    std::mutex& out_mtx);

/// The answer `line` stands for: choice N for "N" (1-based, in range),
/// else the trimmed line.
std::string clarify_answer(const std::string& line,
                           const clarify_prompt& prompt);

} // namespace mibyan::cli
