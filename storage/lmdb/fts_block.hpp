// File: storage/lmdb/fts_block.hpp
//
// The encoding of one block of a term's postings in the full-text index
// (storage/lmdb/fts_index.hpp, database `fts_blocks`). A block holds the
// postings of consecutive message ids of one term, ids increasing. Its
// key is `term \0 be64(first id)`; its value is the postings back to back,
// each:
//   varint  id delta (from the previous posting; 0 for the first, whose id
//           is the key's)
//   varint  doc: document length in words * 4 + role code (system 1,
//           user 2, assistant 3, tool 0)
//   varint  tf: occurrences of the term in the message
//   tf x varint  positions, delta-coded (the first from 0)
// There is no count: a reader decodes to the end of the value. A block is
// closed once its value reaches max_block_bytes (LMDB keeps values below
// about 2 KiB on the leaf page; larger ones would take overflow pages).
//
// Thread safety: pure functions over bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mibyan {

enum class fts_role : uint8_t;

namespace fts_block {

constexpr size_t max_block_bytes = 1024;

struct entry {
  uint64_t id = 0;
  uint32_t doc_length = 0;
  fts_role role{};
  uint32_t tf = 0;
  /// The tf delta-coded positions (a view into the block's bytes).
  std::string_view positions;
};

/// Appends one posting to `out`; `prev_id` is the id of the posting before
/// it in the block (the block's first id for the first posting).
void append(std::string& out, uint64_t prev_id, const entry& e,
            const std::vector<uint32_t>& positions);

/// Appends one posting whose positions are already encoded.
void append_encoded(std::string& out, uint64_t prev_id, const entry& e);

/// Decodes a whole block whose first id is `first_id` into `out`
/// (cleared first). False when the bytes are malformed.
bool decode(std::string_view block, uint64_t first_id,
            std::vector<entry>& out);

/// Decodes `tf` delta-coded positions.
bool positions(std::string_view v, uint32_t tf, std::vector<uint32_t>& out);

/// The block key of `term` starting at `first_id`.
std::string key(std::string_view term, uint64_t first_id);

} // namespace fts_block
} // namespace mibyan
