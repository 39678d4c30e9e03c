// The session store: opening, schema migration and the clock. The
// operations live in session_store_{sessions,messages,search}.cpp.
#include "storage/session_store.hpp"

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
#include "storage/session_store_detail.hpp"
#include "storage/space_reserve.hpp"

namespace mibyan {

using namespace store_detail;

// -- open and migrate ---------------------------------------------------------

std::string session_store::default_dir(const std::string& home) {
  return home + "/sessions";
}

store_result<std::unique_ptr<session_store>>
session_store::open(session_store_options opts) {
  using result = store_result<std::unique_ptr<session_store>>;
  lmdb_options lo;
  lo.dir = opts.dir;
  lo.read_only = opts.read_only;
  lo.map_size = opts.map_size;
  auto env = lmdb_env::open(lo);
  if (!env)
    return result::failure(env.code, "open session store: " + env.error);
  std::unique_ptr<session_store> self{new session_store};
  self->opts_ = std::move(opts);
  self->env_ = std::move(*env);
  struct named {
    const char* name;
    MDB_dbi* dbi;
  };
  named dbis[] = {{"meta", &self->meta_},
                  {"sessions", &self->sessions_},
                  {"sessions_by_time", &self->by_time_},
                  {"children", &self->children_},
                  {"msgs", &self->msgs_},
                  {"msg_by_id", &self->msg_by_id_},
                  {"msg_keys", &self->msg_keys_}};
  for (auto& d : dbis) {
    auto r = self->env_->open_dbi(d.name);
    if (!r)
      return result::failure(r.code, "open session store: " + r.error);
    *d.dbi = *r;
  }
  if (auto r = self->env_->open_dbi("approvals"); r) {
    self->approvals_ = *r;
    self->has_approvals_ = true;
  } else if (!self->opts_.read_only) {
    return result::failure("open session store: " + r.error);
  }
  auto fts = fts_index::open(*self->env_);
  if (!fts)
    return result::failure(fts.code, "open session store: " + fts.error);
  self->fts_ = *fts;
  if (auto st = self->migrate(); !st)
    return result{st};
  // Best effort: on a full disk the reserve is recreated by a later open.
  if (!self->opts_.read_only)
    (void) ensure_reserve(self->env_->dir());
  return result{std::move(self)};
}

store_status session_store::migrate() {
  int found = 0;
  auto st = env_->read(
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
  if (!st)
    return st;
  if (found > schema_version_current)
    return store_status::failure(status_code::data_corrupt,
      "open session store: schema version " + std::to_string(found)
      + " is newer than this build supports ("
      + std::to_string(schema_version_current) + "); upgrade mibyan");
  schema_version_ = found;
  if (opts_.read_only || found == schema_version_current)
    return {};
  // Each step runs in its own transaction with its version bump, so an
  // interrupted migration resumes at the failed step. Version 0 is a store
  // created before versioning (or a fresh one): the layout of version 1
  // is a superset, so the step only records the version. Version 2
  // rebuilds the full-text index in the block format (reindex_fts, in
  // resumable chunks; the last one records the version).
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

int64_t session_store::now() const {
  if (opts_.now_ms)
    return opts_.now_ms();
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch())
    .count();
}

} // namespace mibyan
