// File: storage/store_checks.hpp
//
// Input validation shared by the session store's backends, so that every
// backend rejects the same input with the same message: each returns ""
// when the input is acceptable, else why not (the store wraps it into an
// invalid_argument error naming the operation).
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "messages/chat.hpp"
#include "storage/session_record.hpp"

namespace mibyan::store_checks {

/// Largest `limit` of a search request.
constexpr size_t max_search_limit = 1000;

/// The byte offset of the first invalid UTF-8 sequence, or npos.
size_t invalid_utf8_at(std::string_view s);
/// "" if `s` is valid UTF-8, else a message naming the field and offset.
std::string check_utf8(const char* field, std::string_view s);
/// "" for a well-formed session id, else why not.
std::string check_session_id(const std::string& id);
/// "" for a storable message (role, tool fields, size, UTF-8), else why not.
std::string check_message(const chat_message& m, size_t max_bytes);
std::string check_text_field(const char* field, const std::string& s,
                             size_t max);

/// "" for a storable list of approved pattern keys (at most 256, each 1 to
/// 200 bytes without a newline), else why not.
std::string check_approval_keys(const std::vector<std::string>& keys);

/// "" when every count is >= 0.
std::string check_usage(const token_usage& u, int64_t api_calls);
/// Adds the counts to the session's counters.
void apply_usage(session_info& s, const token_usage& u, int64_t api_calls);
/// Ends the session unless it has ended already (the first end stays).
void apply_end(session_info& s, const std::string& reason, int64_t at_ms);

} // namespace mibyan::store_checks
