// The LMDB session store, part: group commit (commit_group).
// Several writers' requests share one write transaction and so one fsync;
// docs/storage.md ("Group commit") states the guarantees.
#include "storage/lmdb/lmdb_session_store.hpp"

#include "storage/lmdb/lmdb_store_detail.hpp"

namespace mibyan {

using namespace store_detail;

namespace {

const char* op_name(store_write::kind k) {
  switch (k) {
    case store_write::kind::create: return "create_session";
    case store_write::kind::append: return "append_message";
    case store_write::kind::usage: return "add_usage";
    case store_write::kind::end: return "end_session";
  }
  return "write";
}

} // namespace

store_status lmdb_session_store::commit_group(std::vector<store_write>& writes) {
  // Input checks need no transaction; a rejected write is skipped below.
  std::vector<char> valid(writes.size(), 1);
  std::vector<session_info> prepared(writes.size());
  for (size_t i = 0; i < writes.size(); ++i) {
    auto& w = writes[i];
    std::string err;
    switch (w.what) {
      case store_write::kind::create: {
        auto r = prepare_session(w.create);
        if (!r) {
          w.status = r.get_status();
          valid[i] = 0;
          continue;
        }
        prepared[i] = std::move(*r);
        break;
      }
      case store_write::kind::append:
        err = check_append(w.append);
        break;
      case store_write::kind::usage:
        if ((err = check_session_id(w.session_id)).empty())
          err = check_usage(w.usage, w.api_calls);
        break;
      case store_write::kind::end:
        if ((err = check_session_id(w.session_id)).empty())
          err = check_text_field("end reason", w.reason, max_title_bytes);
        break;
    }
    if (!err.empty()) {
      w.status = store_status::failure(status_code::invalid_argument,
                                       std::string{op_name(w.what)} + ": "
                                         + err);
      valid[i] = 0;
    }
  }
  int64_t stamp = now();
  auto st = env_->write(
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
            lmdb_env::code_of(r), std::string{op_name(w.what)} + ": " + why);
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
  if (!st)
    for (size_t i = 0; i < writes.size(); ++i)
      if (valid[i] != 0 && writes[i].status.ok())
        writes[i].status = store_status::failure(
          st.code, std::string{op_name(writes[i].what)} + ": " + st.error);
  return st;
}

} // namespace mibyan
