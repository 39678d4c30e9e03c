// File: config/yaml_checks.hpp
//
// Structural checks of a parsed config document that yaml-cpp 0.7 does not
// make itself. Called by the loader inside its exception guard; CAF-free,
// thread-safe (no shared state).
#pragma once

#include <string>

namespace YAML {
class Node;
}

namespace mibyan {

/// Returns "" when no mapping in `root` (at any nesting level, including
/// mappings inside lists) repeats a key; otherwise one line in the loader's
/// format naming the second occurrence, e.g.
/// "/h/config.yaml:5: terminal.timeout: duplicate key (first given at line
/// 2)". yaml-cpp keeps both entries, and a lookup would silently see only
/// one of them. Nesting deeper than 64 levels is not inspected.
std::string find_duplicate_key(const YAML::Node& root,
                               const std::string& origin);

} // namespace mibyan
