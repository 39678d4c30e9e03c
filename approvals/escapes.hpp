// File: approvals/escapes.hpp
//
// Decoders for the literal forms a shell turns into other text before it
// runs anything: ANSI-C quoting ($'\x72\x6d'), printf formats
// (printf '\162\155'), echo -e, and base64. The approval analysis uses
// them to see the command that will actually run (docs/approvals.md,
// "Structure"). Pure functions, bounded output; any thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mibyan::approvals {

/// The most bytes any decoder here returns (longer output is cut).
constexpr size_t max_decoded = 64 * 1024;

/// The value of an ANSI-C quoted string: `body` is the text between
/// `$'` and `'`. Handles \a \b \e \E \f \n \r \t \v \\ \' \" \? \NNN
/// (octal), \xHH, \uHHHH, \UHHHHHHHH (as UTF-8) and \cX.
std::string decode_ansi_c(std::string_view body);

/// What `printf FORMAT ARGS...` prints, for literal arguments (`args[0]`
/// is the format): backslash escapes, %s %b %c %d %i %u %x %o %%, flags
/// and widths read and ignored, the format reused while arguments remain.
/// nullopt for an empty argument list.
std::optional<std::string> printf_output(const std::vector<std::string>& args);

/// What `echo ARGS...` prints (bash: -n, -e and -E are read; escapes
/// are interpreted with -e only).
std::string echo_output(const std::vector<std::string>& args);

/// Standard or URL-safe base64 (whitespace ignored, padding optional).
/// nullopt when the text is not base64.
std::optional<std::string> base64_decode(std::string_view text);

} // namespace mibyan::approvals
