// File: storage/fts_query.hpp
//
// Parses a search string into the units the index matches. The parser
// never fails: stray characters are separators, an unbalanced quote runs
// to the end of the string, a bare `AND` is ignored (AND is the default).
//   foo bar        -> messages containing both words
//   "foo bar"      -> the words next to each other, in this order
//   session_store  -> one bare word that tokenizes into several words is a
//                     phrase ("session store"), as it appeared in the text
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace mibyan {

/// A single term (one word) or a phrase (several words, consecutive).
struct fts_unit {
  std::vector<std::string> terms;
  bool is_phrase() const { return terms.size() > 1; }
};

struct fts_query {
  /// All must match (AND). Duplicates removed, order of first appearance.
  std::vector<fts_unit> units;
  bool empty() const { return units.empty(); }
  /// Distinct terms of all units.
  std::vector<std::string> distinct_terms() const;
};

fts_query parse_fts_query(std::string_view text);

} // namespace mibyan
