// File: mcp_server/elicitation.hpp
//
// Approvals and clarify questions as MCP form-mode elicitations
// (elicitation/create, docs/mcp.md "Approvals through elicitation"): the
// request params built from an approval or clarify prompt, and the
// client's answer mapped back. Pure and CAF-free; untrusted answers map
// to deny / no answer, never throw.
#pragma once

#include <string>

#include "base/json.hpp"
#include "mibyan/approval.hpp"
#include "mibyan/clarify.hpp"

namespace mibyan {

/// params of elicitation/create asking to approve `p`: a form with one
/// required string `decision` whose enum is once / session / always / deny
/// (session and always only where `p` allows them). `version` is the
/// session's protocol revision ("mode":"form" is sent from 2025-11-25 on).
json::value approval_elicitation(const approval_prompt& p,
                                 const std::string& version);

/// The choice an elicitation result means: action "accept" with a known
/// `decision` (one `p` allows) is that choice; decline, cancel, anything
/// else is deny.
approval_choice approval_choice_of(const json::value& result,
                                   const approval_prompt& p);

/// params of elicitation/create asking the question of `p`: a form with
/// one required string `answer` (with the suggested choices, if any, in
/// its description).
json::value clarify_elicitation(const clarify_prompt& p,
                                const std::string& version);

/// The answer text: `answer` of an accepted result, else "".
std::string clarify_answer_of(const json::value& result);

} // namespace mibyan
