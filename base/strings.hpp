// File: base/strings.hpp
//
// The one set of small ASCII string helpers (case folding, trimming,
// prefix/suffix tests, split and join) used across the tree instead of
// private copies. Pure functions: thread-safe, no locale (only the ASCII
// letters A-Z change case; every other byte, UTF-8 included, is kept), and
// none of them fails or throws except std::bad_alloc.
//
// `trim*_view` return views into their argument: the caller keeps the
// argument alive. The other functions return owned strings.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace mibyan::strings {

/// Space, tab, CR and LF: what `trim` removes unless told otherwise.
inline constexpr std::string_view blank = " \t\r\n";

/// The bytes C's isspace() accepts in the C locale (blank plus \v and \f).
inline constexpr std::string_view ascii_space = " \t\n\v\f\r";

/// `s` with A-Z lowered.
std::string lower(std::string_view s);

/// `s` with a-z raised.
std::string upper(std::string_view s);

/// `s` without leading and trailing bytes from `chars`.
std::string_view trim_view(std::string_view s,
                           std::string_view chars = blank);

/// `s` without leading bytes from `chars`.
std::string_view trim_left_view(std::string_view s,
                                std::string_view chars = blank);

/// `s` without trailing bytes from `chars`.
std::string_view trim_right_view(std::string_view s,
                                 std::string_view chars = blank);

/// An owned copy of trim_view(s, chars).
std::string trim(std::string_view s, std::string_view chars = blank);

/// Whether `s` begins with `prefix` (every string begins with "").
bool starts_with(std::string_view s, std::string_view prefix);

/// Whether `s` ends with `suffix` (every string ends with "").
bool ends_with(std::string_view s, std::string_view suffix);

/// Whether `a` and `b` are equal ignoring ASCII case.
bool iequals(std::string_view a, std::string_view b);

/// The pieces of `s` between occurrences of `sep` (which must not be
/// empty; an empty `sep` gives {s}). Empty pieces are kept: "a,,b" gives
/// {"a", "", "b"} and "" gives {""}.
std::vector<std::string> split(std::string_view s, char sep);

/// The parts joined with `sep` between each two ("" for no parts).
std::string join(const std::vector<std::string>& parts, std::string_view sep);

} // namespace mibyan::strings
