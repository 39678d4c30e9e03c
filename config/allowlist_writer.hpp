// File: config/allowlist_writer.hpp
//
// Adds a pattern key to the top-level `command_allowlist` of a config file
// (the "always" answer of an approval prompt, docs/approvals.md). Blocking
// file I/O: call from a blocking-pool thread. Not synchronised across
// processes; callers in one process serialise (approval_service does).
#pragma once

#include <string>

#include "base/status.hpp"

namespace mibyan {

/// Appends `key` to `command_allowlist` in the YAML file `path` (created
/// 0600 when missing). When the file has no such key, a block is appended
/// at the end and the rest of the file (comments included) stays as it
/// is; otherwise the file is rewritten through yaml-cpp (comments are
/// lost). A key already listed changes nothing. Fails with
/// invalid_argument for an empty path or a bad key, config_invalid for a
/// file that is not YAML or has a non-list command_allowlist, and the
/// write's status when the file cannot be written.
status add_to_command_allowlist(const std::string& path,
                                const std::string& key);

} // namespace mibyan
