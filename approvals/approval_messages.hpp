// File: approvals/approval_messages.hpp
//
// The texts a blocked command returns to the model (docs/approvals.md,
// "Messages"). Every refusal tells the model not to retry, rephrase or
// reach the same outcome another way; denials and timeouts say plainly
// that the user did not consent.
#pragma once

#include <string>
#include <vector>

namespace mibyan::approvals {

/// "a, b and c".
std::string join_descriptions(const std::vector<std::string>& ds);

std::string hardline_message(const std::string& description);
std::string deny_rule_message(const std::string& glob);
std::string sudo_stdin_message();
/// No interactive channel; `config_key` is e.g. "approvals.single_query_mode".
std::string no_channel_message(const std::vector<std::string>& descriptions,
                               const std::string& config_key);
std::string smart_deny_message(const std::vector<std::string>& descriptions);
std::string human_deny_message(const std::vector<std::string>& descriptions);
std::string timeout_message(const std::vector<std::string>& descriptions,
                            long long seconds);
/// Cancelled while waiting for the human.
std::string cancelled_message(const std::vector<std::string>& descriptions);
/// The denial circuit breaker's suffix for `count` consecutive denies.
std::string breaker_suffix(long long count);
/// The whole-script guard refusing execute_code.
std::string script_blocked_message(const std::string& config_key);

} // namespace mibyan::approvals
