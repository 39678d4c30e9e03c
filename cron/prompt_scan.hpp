// File: cron/prompt_scan.hpp
//
// A scanner for text that tries to override the agent's instructions or to
// hide content from the person who reads it (docs/cron.md, "Job model"):
// a job's prompt is refused at creation when it finds something, and
// project context files (AGENTS.md and the like, agent/context_files.hpp)
// are flagged or refused with it.
//
// It looks for:
// * invisible and direction-changing characters: bidi controls (U+202A-E,
//   U+2066-9, U+200E/F, U+061C), zero-width characters (U+200B-D, U+2060,
//   U+FEFF inside the text), tag characters (U+E0000-E007F, which can
//   spell hidden ASCII), other format controls (U+00AD soft hyphen is
//   allowed), and C0/C1 control characters other than tab, LF, CR;
// * instruction-override phrases ("ignore (all) previous instructions",
//   "disregard the above", "forget your instructions", "you are now ...",
//   "new system prompt", "do not tell the user", ...) matched on a
//   normalised form (case-folded, punctuation and runs of spaces folded,
//   common letter look-alikes mapped), so spacing and capitals do not
//   hide them; requests to reveal the system prompt; a phrase inside an
//   HTML comment (which a rendered Markdown file hides) says so;
// * base64 runs (>= 24 characters) that decode to text containing such a
//   phrase (one level deep), and text that is not valid UTF-8.
//
// Findings carry a kind, the byte offset and a short reason for people.
// The scanner is a heuristic against accidental or naive injection, not a
// security boundary: the approval gates still apply to what a run does.
//
// Pure functions; any thread; linear in the text (inputs are capped by the
// caller).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.hpp"

namespace mibyan {

struct prompt_finding {
  enum class kind : uint8_t {
    invisible_char,  ///< zero-width, tag or other format character
    bidi_control,    ///< changes the direction text is shown in
    control_char,    ///< C0/C1 control other than tab and newlines
    override_phrase, ///< tries to replace the instructions
    encoded_payload, ///< base64 that decodes to an override phrase
    invalid_utf8,
  };
  kind what = kind::override_phrase;
  /// Byte offset in the scanned text.
  size_t offset = 0;
  /// E.g. "U+202E (right-to-left override) at byte 12", "'ignore previous
  /// instructions' at line 3".
  std::string reason;
};

/// The kind's name ("invisible_char", ...).
const char* to_string(prompt_finding::kind k);

struct prompt_scan_options {
  /// Stop after this many findings.
  size_t max_findings = 20;
  /// Shortest base64 run that is decoded and checked.
  size_t min_base64_chars = 24;
};

/// Every finding in `text`, in order of offset (at most max_findings).
std::vector<prompt_finding> scan_prompt(std::string_view text,
                                        const prompt_scan_options& opts = {});

/// Ok when `text` has no finding; otherwise permission_denied: "<what> was
/// refused: it <first reason>[ (and N more findings)]", e.g. "the job's
/// prompt was refused: it contains an instruction override ('ignore
/// previous instructions' at line 2)".
status check_prompt_text(std::string_view text, std::string_view what);

} // namespace mibyan
