#include "approvals/approval_messages.hpp"

namespace mibyan::approvals {

namespace {

const char* no_retry =
  " Do not retry it, rephrase it, or reach the same outcome with a "
  "different command or tool; stop the current workflow and report to "
  "the user what you wanted to do and why.";

} // namespace

std::string join_descriptions(const std::vector<std::string>& ds) {
  std::string out;
  for (size_t i = 0; i < ds.size(); ++i) {
    if (i > 0)
      out += i + 1 == ds.size() ? " and " : ", ";
    out += ds[i];
  }
  return out.empty() ? std::string{"a dangerous operation"} : out;
}

std::string hardline_message(const std::string& description) {
  return "BLOCKED (hardline): " + description
         + ". This command is on an unconditional blocklist: it is never "
           "run, and neither --yolo, approvals.mode: off, an allowlist nor "
           "cron approval lifts it. Do not retry or rephrase it, and do not "
           "try to reach the same outcome another way.";
}

std::string deny_rule_message(const std::string& glob) {
  return "BLOCKED: this command matches the user-defined deny rule '" + glob
         + "' (approvals.deny in config.yaml), so it was not run." + no_retry;
}

std::string sudo_stdin_message() {
  return std::string{"BLOCKED: sudo -S / --stdin reads a password from "
                     "standard input, and no sudo password is configured; "
                     "feeding passwords to sudo through stdin is not "
                     "allowed, so the command was not run."}
         + no_retry;
}

std::string no_channel_message(const std::vector<std::string>& descriptions,
                               const std::string& config_key) {
  return "BLOCKED: this command needs the user's approval ("
         + join_descriptions(descriptions)
         + "), but no user is present to approve it in this non-interactive "
           "context, so it was not run. The user did NOT consent. (The user "
           "can allow such commands here by setting " + config_key
         + ": approve in config.yaml.)" + no_retry;
}

std::string smart_deny_message(const std::vector<std::string>& descriptions) {
  return "BLOCKED by smart approval: " + join_descriptions(descriptions)
         + ". The security reviewer judged this command genuinely dangerous, "
           "so it was not run, and the user did NOT consent to it."
         + no_retry;
}

std::string human_deny_message(const std::vector<std::string>& descriptions) {
  return "BLOCKED: the user denied this command ("
         + join_descriptions(descriptions)
         + "). The user did NOT consent, and the command was not run."
         + no_retry;
}

std::string timeout_message(const std::vector<std::string>& descriptions,
                            long long seconds) {
  return "BLOCKED: the approval request for this command ("
         + join_descriptions(descriptions) + ") got no answer within "
         + std::to_string(seconds)
         + " seconds. Silence is not consent: the user did NOT consent, and "
           "the command was not run."
         + no_retry;
}

std::string cancelled_message(const std::vector<std::string>& descriptions) {
  return "BLOCKED: the approval request for this command ("
         + join_descriptions(descriptions)
         + ") was cancelled before the user answered. The user did NOT "
           "consent, and the command was not run."
         + no_retry;
}

std::string breaker_suffix(long long count) {
  return " [" + std::to_string(count)
         + " consecutive commands were blocked by the security reviewer. "
           "Stop trying variations: report the blocked operation to the user "
           "and ask them to run it manually or to approve it.]";
}

std::string script_blocked_message(const std::string& config_key) {
  return "BLOCKED: execute_code runs a script that can spawn processes or "
         "change files without passing terminal approval, and no user is "
         "present to approve it in this non-interactive context, so the "
         "script was not run. The user did NOT consent. Use the normal tools "
         "(terminal, read_file, write_file, patch, search_files) instead; "
         "each is checked on its own. (The user can allow scripts here with "
         + config_key + ": approve, or by adding execute_code to "
         "command_allowlist.)";
}

} // namespace mibyan::approvals
