// File: storage/session_id.hpp
//
// The one format of generated session ids: `YYYYMMDD_HHMMSS_<6 hex>` in
// local time, readable in listings and sortable by start time. The store
// generates ids this way (retrying on a collision); front ends that need an
// id before the session exists (the CLI, the embedding agent) use
// new_session_id(). Thread-safe.
#pragma once

#include <cstdint>
#include <string>

namespace mibyan {

/// The id for a session started at `started_at_ms` (milliseconds since the
/// epoch) with the random suffix `random24` (its low 24 bits are used).
std::string format_session_id(int64_t started_at_ms, uint32_t random24);

/// A fresh id for a session starting now, with a random suffix.
std::string new_session_id();

} // namespace mibyan
