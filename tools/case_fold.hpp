// File: tools/case_fold.hpp
//
// Unicode-aware case folding for name matching (search_files' ignore_case
// on file names). Thread-safe; never throws.
#pragma once

#include <string>
#include <string_view>

namespace mibyan {

/// Returns `utf8` with every letter mapped to its simple case-folded form
/// (lower(upper(c)), using the C library's Unicode tables of the C.UTF-8
/// locale), so "ÉCOLE", "école" and "École" fold alike. Characters without
/// case (CJK, digits, punctuation) and invalid UTF-8 bytes are kept as they
/// are.
std::string fold_case(std::string_view utf8);

} // namespace mibyan
