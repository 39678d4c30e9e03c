// File: cli/approval_prompt.hpp
//
// The terminal approval channel of `mibyan chat` (docs/approvals.md,
// "Channels"): prints the flagged command and reads one answer line from
// stdin - once, session, always or deny. No answer within the prompt's
// timeout is a timeout (deny); a cancelled call stops waiting at once.
#pragma once

#include <mutex>

#include "approvals/approval_types.hpp"

namespace mibyan::cli {

/// Asks on the terminal; concurrent calls are asked one after another. `out_mtx` serialises writes to stdout with the
/// chat's streaming output. Reads fd 0 directly: call only while the main
/// thread is not reading stdin (it waits for the turn).
approval_choice ask_on_terminal(const approval_prompt& prompt,
                                std::mutex& out_mtx);

/// Reads an answer word: o/once/y/yes, s/session, a/always, d/deny/n/no.
/// Anything else is deny.
approval_choice parse_approval_answer(const std::string& line,
                                      const approval_prompt& prompt);

} // namespace mibyan::cli
