// File: base/redact_base64.hpp
//
// Internal to the secret redactor (base/redact.cpp): secrets passed
// through base64.
//
//   * A known literal secret (an environment, .env or configuration
//     value) encoded inside a base64 text: the three encodings of its
//     bytes (one per alignment modulo 3, without the characters the
//     neighbouring bytes change) are searched like the literal itself,
//     in the standard and the URL-safe alphabet; the whole base64 run
//     around a hit is replaced.
//   * A base64 blob (at least 24 characters of the alphabet, mixed case,
//     not hex) whose decoded bytes hold a secret: a private key (OpenSSH
//     "openssh-key-v1", a DER private key, a PEM block) or anything the
//     redactor's own rules find in the decoded text.
//
// Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace mibyan::redact_detail {

/// The base64 fragments that always appear when `secret` is encoded as
/// part of a longer text: one per byte alignment, plus the URL-safe
/// spelling of those that differ. Empty for secrets under 6 bytes.
std::vector<std::string> base64_fragments(std::string_view secret);

/// The base64 fragments of the known secrets, indexed so that every
/// position of a base64 run is checked with one hash lookup.
class base64_fragment_index {
public:
  base64_fragment_index();
  /// Adds the fragments of `secret` (base64_fragments), which belong to
  /// secret number `id`.
  void add(std::string_view secret, uint32_t id);
  bool empty() const { return entries_.empty(); }
  /// The id of a secret one of whose fragments occurs in `run`, or -1.
  int64_t find(std::string_view run) const;

private:
  struct entry {
    uint16_t hash;
    std::string text;
    uint32_t id;
  };
  std::vector<uint64_t> bits_; // 65536 bits: hashes of fragment prefixes
  std::vector<entry> entries_;
};

/// The base64 run that starts at s[i]: `end` after its last alphabet
/// character, `padded_end` after the '=' padding that follows, and
/// whether it may be base64 worth decoding (at least 24 characters, upper
/// and lower case letters, not only hex digits and dashes). A run that
/// opens with 16 hex digits or dashes (a digest, a UUID) is reported as
/// hex_only after those 16 characters, unexamined beyond.
struct base64_run {
  size_t end = 0;
  size_t padded_end = 0;
  bool decodable = false;
  /// Only hex digits and dashes (digests, UUIDs): not searched for
  /// fragments either.
  bool hex_only = false;
  /// Upper and lower case letters (base64 of text always has both).
  bool mixed_case = false;
};
base64_run examine_base64_run(std::string_view s, size_t i);

/// Whether decoded bytes are (the start of) a private key.
bool decoded_private_key(std::string_view bytes);

} // namespace mibyan::redact_detail
