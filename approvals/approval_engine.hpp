// File: approvals/approval_engine.hpp
//
// The stateless part of the approval pipeline (docs/approvals.md,
// "Pipeline", steps 1-7): hardline patterns, deny globs, the sudo stdin
// guard, bypass, the permanent allowlist and dangerous-pattern detection.
// What happens to a flagged command (non-interactive deny, smart mode,
// the human prompt) is the approval service's business
// (approvals/approval_service.hpp). Pure; any thread.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "approvals/normalize.hpp"

namespace mibyan::approvals {

/// What the pipeline needs to know besides the command.
struct policy {
  home_paths paths;
  /// `approvals.deny`.
  const std::vector<std::string>* deny_globs = nullptr;
  /// A sudo password is configured (SUDO_PASSWORD), so `sudo -S` is not
  /// password guessing.
  bool sudo_password = false;
  /// --yolo, session /yolo or approvals.mode: off.
  bool bypass = false;
  /// `command_allowlist` (pattern keys approved permanently).
  const std::vector<std::string>* permanent = nullptr;
  /// Pattern keys approved for this session.
  const std::set<std::string>* session = nullptr;
};

enum class outcome {
  approved,         ///< run it
  hardline,         ///< blocked unconditionally (detail: description)
  denied_by_rule,   ///< blocked by a deny glob (detail: the glob)
  sudo_stdin,       ///< blocked: sudo -S without a configured password
  needs_approval,   ///< flagged (keys: the unapproved pattern keys)
};

struct assessment {
  outcome result = outcome::approved;
  /// The hardline description or the deny glob.
  std::string detail;
  /// For needs_approval: every pattern key not yet approved.
  std::vector<std::string> keys;
  /// For approved: why ("clean", "bypass", "allowlist", "approved").
  std::string reason;
};

/// Runs steps 1-7 for `command`.
assessment assess(std::string_view command, const policy& p);

} // namespace mibyan::approvals
