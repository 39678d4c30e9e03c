// File: tools/lint_check.hpp
//
// Syntax checks run after write_file and patch, so that the model learns at
// once when an edit broke a file. Only errors the edit introduced are
// reported (the "lint delta"): a file that was already broken stays quiet.
// Checked types: .json (the runtime's JSON parser) and .yaml/.yml
// (yaml-cpp).
//
// Thread-safe (pure functions); never throws.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "base/json.hpp"

namespace mibyan {

/// Returns true when `path` has a type `syntax_error` checks.
bool has_syntax_check(const std::string& path);

/// Returns the syntax error of `content`, judged by the extension of
/// `path`, or nullopt when the content is valid or the type is not checked.
std::optional<std::string> syntax_error(const std::string& path,
                                        std::string_view content);

/// Returns {"status":"error","output":"<message>"} when `after` has a syntax
/// error and `before` (the previous content, nullopt for a new file) had
/// none; null otherwise.
json::value lint_delta(const std::string& path,
                       const std::optional<std::string>& before,
                       std::string_view after);

} // namespace mibyan
