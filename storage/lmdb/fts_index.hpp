// File: storage/lmdb/fts_index.hpp
//
// A word-level inverted index stored in the session environment, ranked
// with BM25 (k1 = 1.2, b = 0.75). Layout (two named databases):
//   fts_blocks key: term \0 be64(first message id of the block)
//              value: a block of up to ~1 KiB of the term's postings, ids
//                     increasing, delta + varint coded with document
//                     length, role, occurrence count and positions
//                     (storage/lmdb/fts_block.hpp)
//   fts_df     key: term            value: varint document frequency
//              key: "\0"            value: be64 document count,
//                                          be64 total document length
// A term's postings are one contiguous key range of blocks ordered by id.
// A query walks the rarest term's blocks; the other terms' readers skip
// forward inside their current block or seek the block holding the next
// candidate, so common terms cost a block decode per seek, not a B-tree
// step per posting. Top results are kept in a bounded heap. The format
// replaced one key per (term, message) in store schema version 2; an older
// store is reindexed when opened read-write (docs/storage.md).
//
// The index does not own transactions: callers pass the transaction of
// the mutation that adds or removes the message, so the message and its
// postings commit together. Functions return 0 or an LMDB code (with
// `error` naming the step), like `lmdb_env::txn_fn`.
//
// Thread safety: an fts_index holds database handles and a cache of the
// last blocks it wrote (below), guarded by its own mutex; use it from any
// thread with that thread's transaction.
//
// Last-block cache: appending a posting needs the id of the last posting of
// the term's last block, which is delta-coded, so finding it means decoding
// the whole block (up to max_block_bytes) for every term of every message.
// add_many keeps, per term (at most last_block_cache_terms terms), the key
// and exact bytes of the last block it wrote and that block's last id; the
// next add_many compares the block it reads in its own transaction with
// those bytes and decodes only when they differ (another writer, a removal,
// an aborted transaction). Equal bytes decode to the same postings, so the
// cache can never give a wrong id.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <lmdb.h>

#include "storage/fts_query.hpp"
#include "storage/lmdb/lmdb_env.hpp"
#include "storage/store_result.hpp"

namespace mibyan {

/// Role codes stored in postings (0 = any other role).
enum class fts_role : uint8_t { other = 0, system, user, assistant, tool };

/// Returns the code of "system", "user", "assistant", "tool" (else other).
fts_role fts_role_of(std::string_view role);
const char* fts_role_name(fts_role r);

struct fts_match {
  uint64_t message_id = 0;
  fts_role role = fts_role::other;
  double score = 0;
};

struct fts_filter {
  /// Bit (1 << role code) per accepted role; 0 accepts all roles.
  uint32_t role_mask = 0;
  /// Optional extra test on a matching message (e.g. its session); called
  /// only for messages that matched every term, phrase and role.
  std::function<bool(uint64_t message_id)> accept;
  size_t limit = 20;
  size_t offset = 0;
};

struct fts_search_out {
  /// The page [offset, offset + limit) of all matches, best first (score
  /// descending, then newer message first).
  std::vector<fts_match> matches;
  /// Number of messages matching, before limit/offset.
  size_t total = 0;
};

struct fts_stats {
  uint64_t doc_count = 0;
  uint64_t total_length = 0;
};

class fts_index {
public:
  static constexpr double k1 = 1.2;
  static constexpr double b = 0.75;

  /// Opens the index databases inside `txn`, the set-up transaction of
  /// the store (lmdb_env::setup), creating them unless `read_only`.
  /// Read-only, a store without `fts_blocks` (written before the block
  /// format) gives an index that is not `available()`. Returns 0 or an
  /// LMDB code with `error` naming the step.
  static int open_in(MDB_txn* txn, bool read_only, fts_index& out,
                     std::string& error);

  /// Indexes `text` as message `id` (ids must not be indexed twice, and
  /// must be greater than every id indexed before).
  int add(MDB_txn* txn, uint64_t id, fts_role role, std::string_view text,
          std::string& error) const;

  /// One message for add_many.
  struct document {
    uint64_t id = 0;
    fts_role role{};
    std::string text;
  };
  /// Indexes several messages (ids increasing, above every indexed id):
  /// each term's last block is read and rewritten once for all of them.
  int add_many(MDB_txn* txn, const std::vector<document>& docs,
               std::string& error) const;

  /// Removes the postings of message `id`; `text` must be what was
  /// indexed (the tokenizer is deterministic, so the same terms come out).
  int remove(MDB_txn* txn, uint64_t id, std::string_view text,
             std::string& error) const;

  /// Runs `q`. An empty query matches nothing.
  int search(MDB_txn* txn, const fts_query& q, const fts_filter& filter,
             fts_search_out& out, std::string& error) const;

  int stats(MDB_txn* txn, fts_stats& out, std::string& error) const;

  /// Checks the whole index: every posting references an existing message
  /// (`role_of(id, role)` returns false for a missing one) with the same
  /// role, document frequencies equal posting counts, and the statistics
  /// match `doc_count`. Appends a line per problem to `problems`.
  int verify(MDB_txn* txn,
             const std::function<bool(uint64_t, fts_role&)>& role_of,
             uint64_t doc_count, std::vector<std::string>& problems,
             std::string& error) const;

  /// Checks that every word of `text` has a posting for message `id`.
  int verify_document(MDB_txn* txn, uint64_t id, std::string_view text,
                      std::vector<std::string>& problems,
                      std::string& error) const;

  /// Returns up to about `max_bytes` of `content` around the first query
  /// word, with matching words wrapped in >>> and <<<, "..." where text
  /// was cut, and line breaks turned into spaces.
  static std::string snippet(std::string_view content, const fts_query& q,
                             size_t max_bytes = 200);
  /// The same excerpt without markers in `out`, and the byte ranges
  /// [begin, end) of the matching words in it (ascending) in `hits`.
  static void snippet_spans(std::string_view content, const fts_query& q,
                            size_t max_bytes, std::string& out,
                            std::vector<std::pair<size_t, size_t>>& hits);

  /// False for a read-only store whose index predates the block format
  /// (schema version 1): it cannot be searched until reindexed.
  bool available() const { return available_; }

  /// Empties the index (both databases), for a reindex.
  int clear(MDB_txn* txn, std::string& error) const;

  /// Terms whose last block add_many remembers (about 1 KiB each).
  static constexpr size_t last_block_cache_terms = 2048;

private:
  struct last_blocks; // fts_index.cpp
  MDB_dbi blocks_ = 0;
  MDB_dbi df_ = 0;
  bool available_ = false;
  std::shared_ptr<last_blocks> last_;
};

} // namespace mibyan
