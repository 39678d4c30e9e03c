// File: approvals/patterns.hpp
//
// The hardline and dangerous command patterns (docs/approvals.md,
// "Patterns"), compiled once per process on first use. Each pattern has a
// description; the description is the pattern key stored in session and
// permanent approvals.
//
// Matching cost: every pattern carries literal keywords; a pattern's regex
// runs on a variant only when one of its keywords occurs in it, so an
// ordinary command costs a handful of substring searches. Long variants
// are matched line by line in bounded windows (std::regex recurses per
// character and would exhaust the stack on a 100 KB line).
//
// Thread safety: the compiled table is immutable; all functions may be
// called from any thread.
#pragma once

#include <string>
#include <vector>

#include "approvals/normalize.hpp"

namespace mibyan::approvals {

/// What the patterns found in one command's variants.
struct scan_result {
  /// The description of the first hardline pattern matched ("" = none).
  /// When set, the other members are not computed.
  std::string hardline;
  /// `sudo -S` / `sudo --stdin` (password read from standard input).
  bool sudo_stdin = false;
  /// The descriptions (keys) of every dangerous pattern matched, in table
  /// order, without duplicates.
  std::vector<std::string> dangerous;
};

scan_result scan_command(const command_variants& v);

/// Every pattern key (dangerous descriptions), for documentation and
/// validation of `command_allowlist`.
std::vector<std::string> dangerous_keys();

/// Compiles the tables now (otherwise on first use). Returns the number
/// of patterns.
size_t warm_up_patterns();

} // namespace mibyan::approvals
