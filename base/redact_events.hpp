// File: base/redact_events.hpp
//
// Internal to the secret redactor (base/redact.cpp): the fast forward of
// its scan. Most text holds no secret; the scan asks this finder for the
// next position where one of its rules could start and skips the bytes in
// between without looking at them one by one. An event is
//
//   * a pair separator that may follow a secret name: '=' or ':' after a
//     space, a tab, a quote or a byte that may end a secret pair name
//     (may_end_secret_pair_name), and ':' that starts "://" (URL
//     userinfo);
//   * a rule byte: '+' or '/' (inside a base64 run), '\\' (an escaped
//     line break before a PEM line);
//   * the start of a token ([A-Za-z0-9_-] after a byte that is none of
//     them) whose first two bytes begin one of the registered prefixes
//     (key shapes, JWTs, Bearer, PEM, .netrc);
//   * the start of a token of at least 10 bytes (maybe base64), when long
//     tokens are asked for.
//
// The finder may report a position where no rule matches (a prefix that
// starts the same two bytes, a long token that is no base64): the scan
// runs its rules there as it would without the finder. It never skips a
// position at which a rule could match, so the scan's result is the same
// with and without it.
//
// The bytes are classified 64 at a time into bit masks (SSE2 where the
// target has it, a byte table otherwise). Immutable after construction;
// thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace mibyan::redact_detail {

class event_finder {
public:
  event_finder();

  /// Registers a literal prefix of a rule that starts at a token start
  /// (only its first two bytes are kept; with `any_case`, in every case).
  void add_prefix(std::string_view prefix, bool any_case = false);

  /// The first event position p with i <= p < end, or `end` when there is
  /// none. Requires end <= s.size() and that i is no position inside a
  /// token (i == 0, s[i - 1] or s[i] is no token byte). Tokens that start
  /// before `long_from` are not events for their length alone (pass
  /// std::string_view::npos for none).
  size_t next(std::string_view s, size_t i, size_t end,
              size_t long_from) const;

private:
  friend class event_cursor;
  bool candidate(const char* p, size_t pos, size_t n) const;

  uint64_t firsts_[4] = {};       // 256 bits: first prefix bytes
  // The first prefix bytes with bit 0x20 set (letters folded to lower
  // case), as nibble tables: byte c is in the set when
  // lo_[c & 15] & hi_[c >> 4] != 0 (for a 16-byte shuffle lookup).
  alignas(16) uint8_t lo_[16] = {};
  alignas(16) uint8_t hi_[16] = {};
  int hi_bits_ = 0;     // distinct high nibbles in use (at most 8)
  bool nibbles_ = true; // the tables hold the whole set
  std::vector<uint64_t> bigrams_; // 65536 bits: first two prefix bytes
};

/// The finder walking one text: it keeps the classification of the 64
/// bytes it looked at last, so the next call from within them costs a
/// few bit operations instead of a new pass (texts dense with events).
/// Same contract as event_finder::next. Borrows the finder and the text;
/// one thread.
class event_cursor {
public:
  event_cursor(const event_finder& f, std::string_view s) : f_(f), s_(s) {}
  size_t next(size_t i, size_t end, size_t long_from);

private:
  void load(size_t at);

  const event_finder& f_;
  std::string_view s_;
  size_t base_ = 0;   // the block classified: [base_, base_ + len_)
  size_t len_ = 0;
  uint64_t fixed_ = 0; // rule bytes and prefix starts in the block
  uint64_t longs_ = 0; // starts of tokens of 10 bytes or more
};

} // namespace mibyan::redact_detail
