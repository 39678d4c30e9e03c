// File: base/redact_normalize.hpp
//
// Internal to the secret redactor (base/redact.cpp): the text the rules
// match on. A secret split by invisible characters (zero-width spaces,
// soft hyphens, NUL, DEL, bidi marks), written with a compatibility form
// (a full-width or mathematical letter, a ligature) or printed as UTF-16
// must be caught like its plain form, so the redactor matches on a
// normalised copy and maps every match back to the original bytes:
//
//   * removed: C0 controls but tab, LF and CR (so UTF-16 text that is
//     mostly ASCII loses its NUL halves), DEL, C1 controls, ANSI escape
//     sequences, and the format characters of Unicode category Cf plus
//     variation selectors and the combining grapheme joiner;
//   * folded as NFKC folds them: full-width ASCII (U+FF01..U+FF5E), the
//     Unicode spaces, mathematical alphanumerics, circled letters and
//     digits, super- and subscript digits, the Latin ligatures.
//
// Invalid UTF-8 is kept byte for byte. Text that is only printable ASCII,
// tab, LF and CR is not normalised at all (the fast path). Pure functions;
// thread-safe; no allocation on the fast path.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mibyan::redact_detail {

/// Whether `s` holds only printable ASCII, tab, LF and CR (nothing to
/// normalise).
bool is_plain_text(std::string_view s);

/// A normalised copy of a text and where each of its bytes came from.
struct normalized_text {
  std::string text;
  /// origin[k]: offset in the source of the character that produced
  /// text[k]; origin[text.size()] is the source's size.
  std::vector<uint32_t> origin;

  /// The source span of the normalised span [b, e): from the character of
  /// text[b] up to the next kept character after text[e - 1] (removed
  /// characters that follow the span belong to it).
  void source_span(size_t b, size_t e, size_t& sb, size_t& se) const;
};

/// Fills `out` with the normalised form of `s` and returns true, or returns
/// false when normalising would not change `s` (or `s` is 4 GiB or more).
bool normalize_for_redaction(std::string_view s, normalized_text& out);

} // namespace mibyan::redact_detail
