// The LMDB session store, part: rebuilding the full-text index when a store of
// schema version 1 (one key per posting in `fts_terms`) is opened
// read-write (docs/storage.md, "Full-text index format").
#include "storage/lmdb/lmdb_session_store.hpp"

#include "base/log.hpp"
#include "storage/byte_codec.hpp"
#include "storage/lmdb/lmdb_store_detail.hpp"

namespace mibyan {

using namespace store_detail;

namespace {

// Where an interrupted reindex resumes: be64(next message id to index).
constexpr const char* reindex_key = "fts_reindex_next";
// Messages indexed per transaction: bounds the pages one commit dirties.
constexpr size_t reindex_chunk = 20000;

} // namespace

store_status lmdb_session_store::reindex_fts() {
  const char* what = "open session store: rebuild the full-text index";
  // 1. Unless resuming: drop the old index, empty the new one, and record
  //    the resume point. Until the version says 2 nothing searches it.
  auto legacy = env_->open_dbi("fts_terms");
  if (!legacy)
    return store_status::failure(legacy.code, std::string{what} + ": "
                                                + legacy.error);
  auto st = env_->write(
    [&](MDB_txn* txn, std::string& error) {
      std::string_view v;
      int rc = lmdb_env::get(txn, meta_, reindex_key, v);
      if (rc == 0)
        return 0;  // resuming
      if (rc != MDB_NOTFOUND)
        return rc;
      if ((rc = mdb_drop(txn, *legacy, 1)) != 0) {
        error = "drop the old index";
        return rc;
      }
      if ((rc = fts_.clear(txn, error)) != 0)
        return rc;
      return lmdb_env::put(txn, meta_, reindex_key, codec::be64(0));
    },
    what);
  if (!st)
    return st;
  // 2. Index the messages in id order, a chunk per transaction; the last
  //    transaction removes the resume point and records version 2.
  size_t indexed = 0;
  for (bool finished = false; !finished;) {
    st = env_->write(
      [&](MDB_txn* txn, std::string& error) {
        finished = false;
        std::string_view v;
        int rc = lmdb_env::get(txn, meta_, reindex_key, v);
        if (rc != 0 || v.size() != 8) {
          error = "read the reindex position";
          return rc != 0 ? rc : static_cast<int>(MDB_CORRUPTED);
        }
        uint64_t next = codec::read_be64(v.data());
        cursor_guard cur;
        if ((rc = mdb_cursor_open(txn, msg_by_id_, &cur.c)) != 0)
          return rc;
        std::string start = codec::be64(next);
        MDB_val k = lmdb_env::val(start);
        MDB_val sv;
        size_t n = 0;
        std::vector<fts_index::document> docs;
        for (rc = mdb_cursor_get(cur.c, &k, &sv, MDB_SET_RANGE);
             rc == 0 && n < reindex_chunk;
             rc = mdb_cursor_get(cur.c, &k, &sv, MDB_NEXT), ++n) {
          if (k.mv_size != 8) {
            error = "malformed msg_by_id key";
            return static_cast<int>(MDB_CORRUPTED);
          }
          uint64_t id = codec::read_be64(static_cast<const char*>(k.mv_data));
          std::string_view rec;
          int r = lmdb_env::get(txn, msgs_, msg_key(lmdb_env::view(sv), id),
                                rec);
          stored_message sm;
          if (r != 0 || !decode_message(rec, sm)) {
            error = "load message " + std::to_string(id);
            return r != 0 ? r : static_cast<int>(MDB_CORRUPTED);
          }
          docs.push_back(fts_index::document{
            id, fts_role_of(sm.message.role), indexed_text(sm.message)});
          next = id + 1;
        }
        if (rc != 0 && rc != MDB_NOTFOUND)
          return rc;
        if (int r = fts_.add_many(txn, docs, error); r != 0)
          return r;
        indexed += n;
        if (rc == MDB_NOTFOUND) {
          finished = true;
          if (opts_.on_migrate)
            opts_.on_migrate(1, 2);
          if ((rc = lmdb_env::del(txn, meta_, reindex_key)) != 0)
            return rc;
          return lmdb_env::put(txn, meta_, version_key, "2");
        }
        return lmdb_env::put(txn, meta_, reindex_key, codec::be64(next));
      },
      what);
    if (!st)
      return st;
  }
  if (indexed > 0)
    MIBYAN_LOG(info, "store", "rebuilt the full-text index of "
               << indexed << " messages (schema version 2)");
  return {};
}

} // namespace mibyan
