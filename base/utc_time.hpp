// File: base/utc_time.hpp
//
// Unix times as the ISO 8601 UTC text the APIs and transcripts show.
//
// Thread-safe (gmtime_r; no state). Never fails.
#pragma once

#include <cstdint>
#include <string>

namespace mibyan {

/// `unix_ms` (milliseconds since the epoch, truncated to the second) as
/// "YYYY-MM-DDTHH:MM:SSZ".
std::string iso_utc_from_ms(int64_t unix_ms);

} // namespace mibyan
