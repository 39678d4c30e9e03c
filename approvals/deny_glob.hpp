// File: approvals/deny_glob.hpp
//
// User deny rules `approvals.deny`: shell-style globs (`*`, `?`, `[...]`),
// case-insensitive, matched against the whole of a normalised command
// (docs/approvals.md, "Deny globs"). Pure; any thread.
#pragma once

#include <string>
#include <vector>

namespace mibyan::approvals {

/// True when `glob` matches all of `text` (case-insensitive; `*` also
/// matches `/` and newlines).
bool glob_matches(const std::string& glob, const std::string& text);

/// The first glob of `globs` that matches one of `texts` ("" = none).
std::string first_matching_glob(const std::vector<std::string>& globs,
                                const std::vector<std::string>& texts);

} // namespace mibyan::approvals
