// The LMDB session store, part: group commit (commit_group).
// Several writers' requests share one write transaction and so one fsync;
// docs/storage.md ("Group commit") states the guarantees.
#include "storage/lmdb/lmdb_session_store.hpp"

#include "storage/lmdb/lmdb_session_lease.hpp"
#include "storage/lmdb/lmdb_store_detail.hpp"

namespace mibyan {

using namespace store_detail;

store_status lmdb_session_store::do_commit_group(
  std::vector<store_write>& writes, const std::vector<char>& valid,
  const std::vector<session_info>& prepared, int64_t stamp) {
  return env_->write(
    [&](MDB_txn* txn, std::string& error) {
      // Runs again from scratch if the map had to grow.
      txn_cache c;
      int rc = begin_cache(txn, c, error);
      for (size_t i = 0; rc == 0 && i < writes.size(); ++i) {
        if (valid[i] == 0)
          continue;
        auto& w = writes[i];
        w.status = {};
        std::string why;
        int r = 0;
        if (w.fence != 0 && w.what != store_write::kind::create) {
          const auto& sid = w.what == store_write::kind::append
                              ? w.append.session_id
                              : w.session_id;
          r = lmdb_check_fence(txn, sid, w.fence, why);
          if (r == 1) {
            // Refused by its fencing token: nothing of it is written.
            w.status = store_status::failure(status_code::permission_denied,
                                             std::string{write_op_name(w.what)}
                                               + ": " + why);
            continue;
          }
          if (r != 0) {
            error = why;
            rc = r;
            break;
          }
        }
        switch (w.what) {
          case store_write::kind::create: {
            w.created = prepared[i];
            r = create_txn(txn, w.created, w.created.id.empty(), why);
            break;
          }
          case store_write::kind::append:
            r = append_txn(txn, c, w.append, stamp, w.appended, why);
            break;
          case store_write::kind::usage:
          case store_write::kind::end: {
            session_info* s = nullptr;
            r = c.session(txn, sessions_, w.session_id, s, why);
            if (r == 0 && w.what == store_write::kind::usage)
              apply_usage(*s, w.usage, w.api_calls);
            else if (r == 0)
              apply_end(*s, w.reason, stamp);
            break;
          }
        }
        // A rejected write has changed nothing (every step checks before
        // it puts); an LMDB failure poisons the transaction: abort all.
        if (r == lmdb_env::user_error || r == lmdb_env::missing_error) {
          w.status = store_status::failure(
            lmdb_env::code_of(r), std::string{write_op_name(w.what)} + ": " + why);
        } else if (r != 0) {
          error = why;
          rc = r;
        }
      }
      if (rc == 0)
        rc = flush_cache(txn, c, error);
      return rc;
    },
    "group commit");
}

} // namespace mibyan
