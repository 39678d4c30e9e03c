// File: storage/postgres/pg_store_detail.hpp
//
// Internal to the PostgreSQL store's .cpp files: session rows, and the
// text forms of tsvector and tsquery built with Mibyan's own tokenizer
// (storage/fts_tokenizer.hpp), so PostgreSQL matches exactly the words
// the LMDB index matches.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "storage/fts_query.hpp"
#include "storage/postgres/pg_connection.hpp"
#include "storage/session_record.hpp"

namespace mibyan::pgd {

/// Reads session `id` (FOR UPDATE when `lock`). not_found names it.
status read_session(pg::connection& c, const std::string& id,
                    session_info& out, bool lock, const char* what);
/// Decodes a `record` column (data_corrupt naming the problem).
status decode_session_row(std::string_view record, session_info& out,
                          const char* what);
/// Writes the session's record back.
status write_session(pg::connection& c, const session_info& s,
                     const char* what);
/// Locks and reads the sessions `ids` in id order (so concurrent writers
/// never deadlock); a missing one is not in `out`.
status lock_sessions(pg::connection& c, std::vector<std::string> ids,
                     std::map<std::string, session_info>& out,
                     const char* what);

/// A text[] literal of ids made of [A-Za-z0-9_.:@-] (no quoting needed
/// beyond the double quotes).
std::string text_array(const std::vector<std::string>& ids);

/// The tsvector literal of `text`: each word with its positions (1-based
/// word index, as the LMDB index counts them), at most 256 positions per
/// word and positions up to 16383 (PostgreSQL's limits), stopping before
/// about 900 KB (a tsvector holds at most 1 MB).
std::string tsvector_text(std::string_view text);
/// The tsquery literal of a parsed query: units AND-ed, a phrase as its
/// words joined by <-> (adjacent positions).
std::string tsquery_text(const fts_query& q);

} // namespace mibyan::pgd
