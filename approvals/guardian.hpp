// File: approvals/guardian.hpp
//
// Smart mode's reviewer (docs/approvals.md, "Smart mode"): the prompt an
// auxiliary model gets and how its answer is read. Pure; any thread.
#pragma once

#include <string>
#include <vector>

namespace mibyan::approvals {

enum class guardian_verdict { approve, deny, escalate };

/// The system prompt: the command is untrusted data; answer exactly one
/// of APPROVE, DENY, ESCALATE.
std::string guardian_system_prompt();

/// The user message: the matched descriptions and the comment-stripped
/// command between markers.
std::string guardian_user_prompt(const std::string& command,
                                 const std::vector<std::string>& descriptions);

/// Reads the model's answer: exactly APPROVE, DENY or ESCALATE (case and
/// surrounding whitespace, quotes, `*` and a final period ignored).
/// Anything else is `escalate`.
guardian_verdict parse_guardian_answer(const std::string& text);

} // namespace mibyan::approvals
