// File: base/output_cap.hpp
//
// Rendering helpers for command output shown to models (terminal now,
// execute_code later): the head/tail truncation marker and ANSI stripping.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace mibyan {

/// Returns the marker placed between head and tail:
/// "\n\n... [OUTPUT TRUNCATED - K <unit> omitted out of T total] ...\n\n".
/// Sizes are counted in bytes of the raw output; `unit` is the word shown
/// ("chars" for terminal, as the reference words it; "bytes" for
/// execute_code).
std::string truncation_marker(uint64_t omitted, uint64_t total,
                              const char* unit = "chars");

/// Returns head + tail when `omitted` is 0, otherwise head + marker + tail.
/// A UTF-8 sequence cut at the end of `head` or the start of `tail` is
/// dropped so the result holds no broken characters at the seams.
std::string render_head_tail(std::string_view head, std::string_view tail,
                             uint64_t omitted, uint64_t total,
                             const char* unit = "chars");

/// Returns `s` without ANSI/VT escape sequences: CSI (ESC [ ... final),
/// OSC/DCS/APC/PM/SOS strings (up to BEL or ESC \), charset designations
/// and other two-byte ESC sequences. Other bytes are kept.
std::string strip_ansi(std::string_view s);

} // namespace mibyan
