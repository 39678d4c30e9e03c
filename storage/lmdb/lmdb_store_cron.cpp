// The LMDB session store, part: scheduled jobs and their run history
// (storage/cron_record.hpp, docs/cron.md "Storage").
//
// cron_jobs     job id -> cron_job_record
// cron_runs     job id \0 be64(seq) -> cron_run_record (seq grows with
//               every inserted run, so a job's runs are in insertion order
//               and the newest is last)
// cron_run_ids  run id -> its cron_runs key
// meta "cron_next_run_seq" -> be64 (the next seq)
//
// The databases are created by any read-write open (no schema version
// step, as for approvals and responses); a read-only open of a store
// written before them has no jobs.
#include "storage/lmdb/lmdb_session_store.hpp"

#include <set>

#include "base/json.hpp"
#include "storage/byte_codec.hpp"
#include "storage/lmdb/lmdb_store_detail.hpp"

namespace mibyan {

using namespace store_detail;

namespace {

constexpr const char* run_seq_key = "cron_next_run_seq";

store_status no_cron(const char* what) {
  return store_status::failure(
    status_code::unavailable,
    std::string{what}
      + ": this store has no cron databases (a read-only open of a store "
        "written before scheduled jobs existed)");
}

std::string run_key(std::string_view job_id, uint64_t seq) {
  std::string k = sub_key(job_id, "");
  codec::put_be64(k, seq);
  return k;
}

// The job id a cron_runs key belongs to ("" for a malformed key).
std::string_view job_of_run_key(std::string_view key) {
  if (key.size() < 10 || key[key.size() - 9] != '\0')
    return {};
  return key.substr(0, key.size() - 9);
}

int read_job(MDB_txn* txn, MDB_dbi dbi, const std::string& id,
             cron_job_record& out, std::string& error) {
  std::string_view v;
  int rc = lmdb_env::get(txn, dbi, id, v);
  if (rc == MDB_NOTFOUND) {
    error = "no job '" + id + "'";
    return lmdb_env::missing_error;
  }
  if (rc != 0) {
    error = "read job '" + id + "'";
    return rc;
  }
  if (!decode_cron_job(v, out)) {
    error = "job '" + id + "' is damaged or of a newer version";
    return static_cast<int>(MDB_CORRUPTED);
  }
  return 0;
}

} // namespace

store_status lmdb_session_store::do_put_cron_job(const cron_job_record& j) {
  if (!has_cron_)
    return no_cron("put_cron_job");
  auto value = encode_cron_job(j);
  return env_->write(
    [&](MDB_txn* txn, std::string& error) {
      int rc = lmdb_env::put(txn, cron_jobs_, j.id, value);
      if (rc != 0)
        error = "write job '" + j.id + "'";
      return rc;
    },
    "put_cron_job");
}

store_result<cron_job_record>
lmdb_session_store::do_get_cron_job(const std::string& id) const {
  using result = store_result<cron_job_record>;
  if (!has_cron_)
    return result::failure(status_code::not_found,
                           "get_cron_job: no job '" + id + "'");
  cron_job_record out;
  auto st = env_->read(
    [&](MDB_txn* txn, std::string& error) {
      return read_job(txn, cron_jobs_, id, out, error);
    },
    "get_cron_job");
  if (!st)
    return result{st};
  return result{std::move(out)};
}

store_result<cron_job_list>
lmdb_session_store::list_cron_jobs(bool schedulable_only) const {
  using result = store_result<cron_job_list>;
  cron_job_list out;
  if (!has_cron_)
    return result{std::move(out)};
  auto st = env_->read(
    [&](MDB_txn* txn, std::string& error) {
      out = {};
      int rc = scan_prefix(
        txn, cron_jobs_, "", [&](std::string_view k, std::string_view v) {
          cron_job_record j;
          if (!decode_cron_job(v, j)) {
            out.damaged.push_back("job '" + json::sanitize_utf8(k)
                                  + "' is damaged or of a newer version");
            return 0;
          }
          if (j.id != k) {
            out.damaged.push_back("job '" + json::sanitize_utf8(k)
                                  + "' is stored under the wrong key");
            return 0;
          }
          if (!schedulable_only || (j.enabled && !j.paused))
            out.jobs.push_back(std::move(j));
          return 0;
        });
      if (rc != 0)
        error = "scan jobs";
      return rc;
    },
    "list_cron_jobs");
  if (!st)
    return result{st};
  return result{std::move(out)};
}

int lmdb_session_store::delete_cron_job_txn(MDB_txn* txn, const std::string& id,
                                       std::string& error) {
  int rc = lmdb_env::del(txn, cron_jobs_, id);
  if (rc == MDB_NOTFOUND) {
    error = "no job '" + id + "'";
    return lmdb_env::missing_error;
  }
  if (rc != 0) {
    error = "delete job '" + id + "'";
    return rc;
  }
  // Collected first: no deletes under a walking cursor.
  std::vector<std::pair<std::string, std::string>> runs; // key, run id
  rc = scan_prefix(txn, cron_runs_, sub_key(id, ""),
                   [&](std::string_view k, std::string_view v) {
                     cron_run_record r;
                     runs.emplace_back(std::string{k},
                                       decode_cron_run(v, r) ? r.id : "");
                     return 0;
                   });
  if (rc != 0) {
    error = "read the job's runs";
    return rc;
  }
  for (auto& [key, run_id] : runs) {
    rc = lmdb_env::del(txn, cron_runs_, key);
    if (rc == 0 && !run_id.empty())
      rc = lmdb_env::del(txn, cron_run_ids_, run_id);
    if (rc != 0 && rc != MDB_NOTFOUND) {
      error = "delete the job's runs";
      return rc;
    }
  }
  return 0;
}

store_status lmdb_session_store::do_delete_cron_job(const std::string& id) {
  if (!has_cron_)
    return no_cron("delete_cron_job");
  return env_->write(
    [&](MDB_txn* txn, std::string& error) {
      return delete_cron_job_txn(txn, id, error);
    },
    "delete_cron_job");
}

store_result<cron_job_record> lmdb_session_store::do_update_cron_job(
  const std::string& id, const std::function<status(cron_job_record&)>& fn) {
  using result = store_result<cron_job_record>;
  if (!has_cron_)
    return result{no_cron("update_cron_job")};
  cron_job_record j;
  status refused;
  auto st = env_->write(
    [&](MDB_txn* txn, std::string& error) {
      refused = {};
      j = {};
      if (int rc = read_job(txn, cron_jobs_, id, j, error); rc != 0)
        return rc;
      refused = fn(j);
      if (!refused.ok()) {
        error = refused.error;
        return lmdb_env::user_error;
      }
      int rc = lmdb_env::put(txn, cron_jobs_, id, encode_cron_job(j));
      if (rc != 0)
        error = "write job '" + id + "'";
      return rc;
    },
    "update_cron_job");
  if (!refused.ok())
    return result{refused};
  if (!st)
    return result{st};
  return result{std::move(j)};
}

int lmdb_session_store::put_cron_run_txn(MDB_txn* txn, const cron_run_record& r,
                                    size_t keep, bool require_job,
                                    std::string& error) {
  auto value = encode_cron_run(r);
  std::string_view old_key;
  int rc = lmdb_env::get(txn, cron_run_ids_, r.id, old_key);
  if (rc == 0) {
    // Replace in place (the run keeps its position in the history).
    std::string key{old_key};
    if (job_of_run_key(key) != r.job_id) {
      error = "run '" + r.id + "' belongs to another job";
      return lmdb_env::user_error;
    }
    rc = lmdb_env::put(txn, cron_runs_, key, value);
    if (rc != 0)
      error = "write run '" + r.id + "'";
    return rc;
  }
  if (rc != MDB_NOTFOUND) {
    error = "read run '" + r.id + "'";
    return rc;
  }
  std::string_view ignored;
  rc = lmdb_env::get(txn, cron_jobs_, r.job_id, ignored);
  if (rc == MDB_NOTFOUND) {
    if (!require_job)
      return 0;
    error = "no job '" + r.job_id + "'";
    return lmdb_env::missing_error;
  }
  if (rc != 0) {
    error = "read job '" + r.job_id + "'";
    return rc;
  }
  uint64_t seq = 1;
  std::string_view sv;
  rc = lmdb_env::get(txn, meta_, run_seq_key, sv);
  if (rc == 0 && sv.size() == 8)
    seq = codec::read_be64(sv.data());
  else if (rc != 0 && rc != MDB_NOTFOUND) {
    error = "read the run sequence";
    return rc;
  }
  auto key = run_key(r.job_id, seq);
  if ((rc = lmdb_env::put(txn, cron_runs_, key, value)) != 0
      || (rc = lmdb_env::put(txn, cron_run_ids_, r.id, key)) != 0
      || (rc = lmdb_env::put(txn, meta_, run_seq_key, codec::be64(seq + 1)))
           != 0) {
    error = "write run '" + r.id + "'";
    return rc;
  }
  if (keep == 0)
    return 0;
  // Prune: the job's oldest runs beyond `keep`.
  std::vector<std::pair<std::string, std::string>> runs; // key, run id
  rc = scan_prefix(txn, cron_runs_, sub_key(r.job_id, ""),
                   [&](std::string_view k, std::string_view v) {
                     cron_run_record x;
                     runs.emplace_back(std::string{k},
                                       decode_cron_run(v, x) ? x.id : "");
                     return 0;
                   });
  if (rc != 0) {
    error = "read the job's runs";
    return rc;
  }
  for (size_t i = 0; i + keep < runs.size(); ++i) {
    rc = lmdb_env::del(txn, cron_runs_, runs[i].first);
    if (rc == 0 && !runs[i].second.empty())
      rc = lmdb_env::del(txn, cron_run_ids_, runs[i].second);
    if (rc != 0 && rc != MDB_NOTFOUND) {
      error = "prune the job's runs";
      return rc;
    }
  }
  return 0;
}

store_status lmdb_session_store::do_put_cron_run(const cron_run_record& r,
                                                 size_t keep) {
  if (!has_cron_)
    return no_cron("put_cron_run");
  return env_->write(
    [&](MDB_txn* txn, std::string& error) {
      return put_cron_run_txn(txn, r, keep, true, error);
    },
    "put_cron_run");
}

store_result<cron_run_record>
lmdb_session_store::do_get_cron_run(const std::string& id) const {
  using result = store_result<cron_run_record>;
  if (!has_cron_)
    return result::failure(status_code::not_found,
                           "get_cron_run: no run '" + id + "'");
  cron_run_record out;
  auto st = env_->read(
    [&](MDB_txn* txn, std::string& error) {
      std::string_view key;
      int rc = lmdb_env::get(txn, cron_run_ids_, id, key);
      if (rc == MDB_NOTFOUND) {
        error = "no run '" + id + "'";
        return lmdb_env::missing_error;
      }
      std::string_view v;
      if (rc == 0)
        rc = lmdb_env::get(txn, cron_runs_, key, v);
      if (rc == MDB_NOTFOUND) {
        error = "run '" + id + "' is indexed but missing";
        return static_cast<int>(MDB_CORRUPTED);
      }
      if (rc != 0) {
        error = "read run '" + id + "'";
        return rc;
      }
      if (!decode_cron_run(v, out)) {
        error = "run '" + id + "' is damaged or of a newer version";
        return static_cast<int>(MDB_CORRUPTED);
      }
      return 0;
    },
    "get_cron_run");
  if (!st)
    return result{st};
  return result{std::move(out)};
}

store_result<std::vector<cron_run_record>>
lmdb_session_store::do_list_cron_runs(const std::string& job_id, size_t limit,
                                      size_t offset, bool* more) const {
  using result = store_result<std::vector<cron_run_record>>;
  std::vector<cron_run_record> out;
  if (!has_cron_)
    return result{std::move(out)};
  bool has_more = false;
  auto st = env_->read(
    [&](MDB_txn* txn, std::string& error) {
      out.clear();
      has_more = false;
      cursor_guard cur;
      int rc = mdb_cursor_open(txn, cron_runs_, &cur.c);
      if (rc != 0)
        return rc;
      // Newest first: from the first key after the job's range, back.
      auto prefix = sub_key(job_id, "");
      std::string end = prefix;
      end.back() = '\x01'; // job id \1 sorts after every job id \0 ...
      MDB_val k = lmdb_env::val(end);
      MDB_val v;
      rc = mdb_cursor_get(cur.c, &k, &v, MDB_SET_RANGE);
      if (rc == 0)
        rc = mdb_cursor_get(cur.c, &k, &v, MDB_PREV);
      else if (rc == MDB_NOTFOUND)
        rc = mdb_cursor_get(cur.c, &k, &v, MDB_LAST);
      size_t skipped = 0;
      for (; rc == 0; rc = mdb_cursor_get(cur.c, &k, &v, MDB_PREV)) {
        auto key = lmdb_env::view(k);
        if (key.substr(0, prefix.size()) != prefix)
          break;
        if (skipped < offset) {
          ++skipped;
          continue;
        }
        if (out.size() == limit) {
          has_more = true;
          break;
        }
        cron_run_record r;
        if (!decode_cron_run(lmdb_env::view(v), r)) {
          uint64_t seq = key.size() >= 8
                           ? codec::read_be64(key.data() + key.size() - 8)
                           : 0;
          error = "run number " + std::to_string(seq) + " of job '" + job_id
                  + "' is damaged or of a newer version";
          return static_cast<int>(MDB_CORRUPTED);
        }
        out.push_back(std::move(r));
      }
      if (rc != 0 && rc != MDB_NOTFOUND) {
        error = "read the job's runs";
        return rc;
      }
      return 0;
    },
    "list_cron_runs");
  if (!st)
    return result{st};
  if (more != nullptr)
    *more = has_more;
  return result{std::move(out)};
}

store_status lmdb_session_store::do_apply_cron_changes(const cron_changes& c,
                                                       size_t keep) {
  if (!has_cron_)
    return no_cron("apply_cron_changes");
  return env_->write(
    [&](MDB_txn* txn, std::string& error) {
      for (auto& j : c.jobs) {
        int rc = lmdb_env::put(txn, cron_jobs_, j.id, encode_cron_job(j));
        if (rc != 0) {
          error = "write job '" + j.id + "'";
          return rc;
        }
      }
      for (auto& r : c.runs)
        if (int rc = put_cron_run_txn(txn, r, keep, false, error); rc != 0)
          return rc;
      for (auto& d : c.deleted_jobs) {
        int rc = delete_cron_job_txn(txn, d, error);
        if (rc == lmdb_env::missing_error)
          continue; // deleting what is gone is done
        if (rc != 0)
          return rc;
      }
      return 0;
    },
    "apply_cron_changes");
}

} // namespace mibyan
