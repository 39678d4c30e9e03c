// File: tools/unified_diff.hpp
//
// A line-based unified diff (the `diff -u` format) for showing the model
// what a file edit changed. Lines are compared byte for byte including their
// terminator, so CRLF and a missing final newline are visible ("\ No newline
// at end of file").
//
// Thread-safe (pure function); never throws except std::bad_alloc.
#pragma once

#include <string>
#include <string_view>

namespace mibyan {

/// Returns the unified diff turning `before` into `after`, with headers
/// `--- <old_label>` and `+++ <new_label>` and `context` lines around each
/// change; "" when the texts are equal. Uses Myers' algorithm on the region
/// between the common prefix and suffix; when that region needs more than
/// `max_edits` edits the region is shown as one replaced block (still a
/// correct diff, only not minimal).
std::string unified_diff(std::string_view before, std::string_view after,
                         const std::string& old_label,
                         const std::string& new_label, int context = 3,
                         int max_edits = 2000);

} // namespace mibyan
