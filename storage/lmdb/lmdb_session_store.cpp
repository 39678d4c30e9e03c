// The LMDB session store: opening, schema migration, the clock and the
// small accessors. The operations live in lmdb_store_*.cpp.
#include "storage/lmdb/lmdb_session_store.hpp"

#include "storage/session_id.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <map>
#include <random>
#include <unordered_map>

#include "base/json.hpp"
#include "storage/byte_codec.hpp"
#include "storage/lmdb/lmdb_store_detail.hpp"
#include "storage/lmdb/schema_lock.hpp"
#include "storage/lmdb/space_reserve.hpp"

namespace mibyan {

using namespace store_detail;

// -- open and migrate ---------------------------------------------------------

store_result<std::unique_ptr<lmdb_session_store>>
lmdb_session_store::open(session_store_options opts) {
  using result = store_result<std::unique_ptr<lmdb_session_store>>;
  lmdb_options lo;
  lo.dir = opts.dir;
  lo.read_only = opts.read_only;
  lo.map_size = opts.map_size;
  auto env = lmdb_env::open(lo);
  if (!env)
    return result::failure(env.code, "open session store: " + env.error);
  std::unique_ptr<lmdb_session_store> self{new lmdb_session_store};
  self->set_common_options(opts.max_message_bytes, opts.now_ms);
  self->opts_ = std::move(opts);
  self->env_ = std::move(*env);
  if (auto st = self->open_databases(); !st)
    return result{st};
  if (auto st = self->migrate(); !st)
    return result{st};
  // Best effort: on a full disk the reserve is recreated by a later open.
  if (!self->opts_.read_only)
    (void) ensure_reserve(self->env_->dir());
  return result{std::move(self)};
}

store_status lmdb_session_store::open_databases() {
  const bool ro = opts_.read_only;
  const unsigned create = ro ? 0u : unsigned{MDB_CREATE};
  struct named {
    const char* name;
    MDB_dbi* dbi;
  };
  const named required[] = {{"sessions", &sessions_},
                            {"sessions_by_time", &by_time_},
                            {"children", &children_},
                            {"msgs", &msgs_},
                            {"msg_by_id", &msg_by_id_},
                            {"msg_keys", &msg_keys_}};
  // One transaction creates every database and, in a new store, records
  // the schema version: another process sees no store or a complete one.
  return env_->setup(
    [&](MDB_txn* txn, std::string& error) {
      int rc = mdb_dbi_open(txn, "meta", 0, &meta_);
      const bool fresh = rc == MDB_NOTFOUND;
      if (fresh && ro) {
        error = "no session store in " + env_->dir()
                + " yet (it is being created or was never written)";
        return lmdb_env::missing_error;
      }
      if (fresh)
        rc = mdb_dbi_open(txn, "meta", MDB_CREATE, &meta_);
      if (rc != 0) {
        error = "open database meta";
        return rc;
      }
      for (auto& d : required) {
        rc = mdb_dbi_open(txn, d.name, create, d.dbi);
        if (rc == MDB_NOTFOUND) {
          error = std::string{"database '"} + d.name
                  + "' does not exist in " + env_->dir()
                  + " (a store of an older version: a read-write open "
                    "adds it)";
          return lmdb_env::user_error;
        }
        if (rc != 0) {
          error = std::string{"open database "} + d.name;
          return rc;
        }
      }
      // A read-only store written before approvals existed has none.
      rc = mdb_dbi_open(txn, "approvals", create, &approvals_);
      has_approvals_ = rc == 0;
      if (!has_approvals_)
        approvals_ = 0;
      if (rc != 0 && !(ro && rc == MDB_NOTFOUND)) {
        error = "open database approvals";
        return rc;
      }
      // The same for the Responses API's records.
      rc = mdb_dbi_open(txn, "responses", create, &responses_);
      if (rc == 0)
        rc = mdb_dbi_open(txn, "responses_by_session", create,
                          &responses_by_session_);
      has_responses_ = rc == 0;
      if (!has_responses_)
        responses_ = responses_by_session_ = 0;
      if (rc != 0 && !(ro && rc == MDB_NOTFOUND)) {
        error = "open database responses";
        return rc;
      }
      // And for scheduled jobs (storage/lmdb/lmdb_store_cron.cpp).
      rc = mdb_dbi_open(txn, "cron_jobs", create, &cron_jobs_);
      if (rc == 0)
        rc = mdb_dbi_open(txn, "cron_runs", create, &cron_runs_);
      if (rc == 0)
        rc = mdb_dbi_open(txn, "cron_run_ids", create, &cron_run_ids_);
      has_cron_ = rc == 0;
      if (!has_cron_)
        cron_jobs_ = cron_runs_ = cron_run_ids_ = 0;
      if (rc != 0 && !(ro && rc == MDB_NOTFOUND)) {
        error = "open database cron_jobs";
        return rc;
      }
      if ((rc = fts_index::open_in(txn, ro, fts_, error)) != 0)
        return rc;
      if (fresh) {
        rc = lmdb_env::put(txn, meta_, version_key,
                           std::to_string(schema_version_current));
        if (rc != 0)
          error = "write schema version";
      }
      return rc;
    },
    "open session store");
}

store_status lmdb_session_store::read_version(int& found) const {
  found = 0;
  return env_->read(
    [&](MDB_txn* txn, std::string& error) {
      std::string_view v;
      int rc = lmdb_env::get(txn, meta_, version_key, v);
      if (rc == MDB_NOTFOUND)
        return 0;
      if (rc != 0)
        return rc;
      found = std::atoi(std::string{v}.c_str());
      if (found <= 0 && v != "0") {
        error = "schema version '" + std::string{v} + "' is unreadable";
        return lmdb_env::user_error;
      }
      return 0;
    },
    "open session store: read schema version");
}

store_status lmdb_session_store::migrate() {
  int found = 0;
  if (auto st = read_version(found); !st)
    return st;
  auto too_new = [&] {
    return store_status::failure(status_code::data_corrupt,
      "open session store: schema version " + std::to_string(found)
      + " is newer than this build supports ("
      + std::to_string(schema_version_current) + "); upgrade mibyan");
  };
  if (found > schema_version_current)
    return too_new();
  schema_version_ = found;
  if (opts_.read_only || found == schema_version_current)
    return {};
  // One process migrates; the others wait here and then find the version
  // it recorded (storage/lmdb/schema_lock.hpp).
  auto lock = schema_lock::acquire(env_->dir());
  if (!lock)
    return store_status::failure(lock.code,
                                 "open session store: " + lock.error);
  if (auto st = read_version(found); !st)
    return st;
  if (found > schema_version_current)
    return too_new();
  schema_version_ = found;
  // Each step runs in its own transaction with its version bump, so an
  // interrupted migration resumes at the failed step. Version 0 is a store
  // created before versioning (a new store records the current version
  // when it is created): the layout of version 1 is a superset, so the
  // step only records the version. Version 2 rebuilds the full-text index
  // in the block format (reindex_fts, in resumable chunks; the last one
  // records the version).
  for (int v = found; v < schema_version_current; ++v) {
    if (v == 1) {
      if (auto step = reindex_fts(); !step)
        return step;
      schema_version_ = 2;
      continue;
    }
    auto step = env_->write(
      [&](MDB_txn* txn, std::string& error) {
        if (opts_.on_migrate)
          opts_.on_migrate(v, v + 1);
        int rc = lmdb_env::put(txn, meta_, version_key,
                               std::to_string(v + 1));
        if (rc != 0)
          error = "write schema version";
        return rc;
      },
      "open session store: migrate schema");
    if (!step)
      return step;
    schema_version_ = v + 1;
  }
  return {};
}

const char* lmdb_session_store::backend() const {
  return "lmdb";
}

int lmdb_session_store::schema_version() const {
  return schema_version_;
}

store_stats lmdb_session_store::stats() const {
  store_stats st;
  st.used_bytes = env_->used_bytes();
  st.disk_bytes = env_->disk_bytes();
  return st;
}

void lmdb_session_store::add_delete_hook(delete_hook hook) {
  std::lock_guard<std::mutex> lock{hooks_mutex_};
  delete_hooks_.push_back(std::move(hook));
}

int lmdb_session_store::run_delete_hooks(MDB_txn* txn, const std::string& id,
                                         std::string& error) {
  std::vector<delete_hook> hooks;
  {
    std::lock_guard<std::mutex> lock{hooks_mutex_};
    hooks = delete_hooks_;
  }
  for (auto& h : hooks)
    if (int rc = h(txn, id, error); rc != 0)
      return rc;
  return 0;
}

} // namespace mibyan
