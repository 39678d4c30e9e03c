// Raw access to an LMDB session store (storage/lmdb/lmdb_inspect.hpp).
#include "storage/lmdb/lmdb_inspect.hpp"

#include "storage/lmdb/lmdb_session_store.hpp"
#include "storage/lmdb/lmdb_store_detail.hpp"

namespace mibyan::lmdb_inspect {

static_assert(schema_version_current
                == lmdb_session_store::schema_version_current,
              "one schema version");

namespace {

// The LMDB environment behind `s`, or null (then `error` says why).
lmdb_env* env_of(const session_store& s, const char* what,
                 store_status& error) {
  auto* l = dynamic_cast<const lmdb_session_store*>(&s);
  if (l == nullptr) {
    error = store_status::failure(status_code::invalid_argument,
                                  std::string{what} + ": the store is not an "
                                    + "LMDB store (backend '" + s.backend()
                                    + "')");
    return nullptr;
  }
  return &const_cast<lmdb_session_store*>(l)->env();
}

int open_db(MDB_txn* txn, const std::string& db, unsigned flags,
            MDB_dbi& dbi, std::string& error) {
  int rc = mdb_dbi_open(txn, db.c_str(), flags, &dbi);
  if (rc != 0)
    error = "open database '" + db + "'";
  return rc;
}

} // namespace

store_status write(session_store& s, const std::vector<change>& changes) {
  store_status err;
  auto* env = env_of(s, "lmdb_inspect::write", err);
  if (env == nullptr)
    return err;
  return env->write(
    [&](MDB_txn* txn, std::string& error) {
      for (auto& c : changes) {
        MDB_dbi dbi = 0;
        int rc = open_db(txn, c.db, MDB_CREATE, dbi, error);
        if (rc != 0)
          return rc;
        switch (c.what) {
          case change::kind::put:
            rc = lmdb_env::put(txn, dbi, c.key, c.value);
            break;
          case change::kind::del:
            rc = lmdb_env::del(txn, dbi, c.key);
            break;
          case change::kind::drop:
            rc = mdb_drop(txn, dbi, 0);
            break;
        }
        if (rc != 0) {
          error = "change database '" + c.db + "'";
          return rc;
        }
      }
      return 0;
    },
    "lmdb_inspect::write");
}

store_result<std::optional<std::string>>
get(const session_store& s, const std::string& db, const std::string& key) {
  using result = store_result<std::optional<std::string>>;
  store_status err;
  auto* env = env_of(s, "lmdb_inspect::get", err);
  if (env == nullptr)
    return result{err};
  std::optional<std::string> out;
  auto st = env->read(
    [&](MDB_txn* txn, std::string& error) {
      MDB_dbi dbi = 0;
      int rc = open_db(txn, db, 0, dbi, error);
      if (rc != 0)
        return rc;
      std::string_view v;
      rc = lmdb_env::get(txn, dbi, key, v);
      if (rc == MDB_NOTFOUND)
        return 0;
      if (rc == 0)
        out = std::string{v};
      return rc;
    },
    "lmdb_inspect::get");
  if (!st)
    return result{st};
  return result{std::move(out)};
}

store_result<std::vector<std::pair<std::string, std::string>>>
scan(const session_store& s, const std::string& db,
     const std::string& prefix) {
  using rows = std::vector<std::pair<std::string, std::string>>;
  using result = store_result<rows>;
  store_status err;
  auto* env = env_of(s, "lmdb_inspect::scan", err);
  if (env == nullptr)
    return result{err};
  rows out;
  auto st = env->read(
    [&](MDB_txn* txn, std::string& error) {
      MDB_dbi dbi = 0;
      int rc = open_db(txn, db, 0, dbi, error);
      if (rc != 0)
        return rc;
      return store_detail::scan_prefix(
        txn, dbi, prefix, [&](std::string_view k, std::string_view v) {
          out.emplace_back(std::string{k}, std::string{v});
          return 0;
        });
    },
    "lmdb_inspect::scan");
  if (!st)
    return result{st};
  return result{std::move(out)};
}

store_result<db_figures> database(const session_store& s,
                                  const std::string& db) {
  using result = store_result<db_figures>;
  store_status err;
  auto* env = env_of(s, "lmdb_inspect::database", err);
  if (env == nullptr)
    return result{err};
  db_figures out;
  auto st = env->read(
    [&](MDB_txn* txn, std::string& error) {
      MDB_dbi dbi = 0;
      int rc = mdb_dbi_open(txn, db.c_str(), 0, &dbi);
      if (rc == MDB_NOTFOUND)
        return 0;
      MDB_stat ms;
      if (rc == 0)
        rc = mdb_stat(txn, dbi, &ms);
      if (rc != 0) {
        error = "stat database '" + db + "'";
        return rc;
      }
      out.entries = ms.ms_entries;
      out.pages = ms.ms_branch_pages + ms.ms_leaf_pages
                  + ms.ms_overflow_pages;
      out.branch_pages = ms.ms_branch_pages;
      out.leaf_pages = ms.ms_leaf_pages;
      out.overflow_pages = ms.ms_overflow_pages;
      out.depth = ms.ms_depth;
      return 0;
    },
    "lmdb_inspect::database");
  if (!st)
    return result{st};
  return result{out};
}

store_result<env_figures> environment(const session_store& s) {
  using result = store_result<env_figures>;
  store_status err;
  auto* env = env_of(s, "lmdb_inspect::environment", err);
  if (env == nullptr)
    return result{err};
  auto pages = env->pages();
  if (!pages)
    return result{pages.get_status()};
  MDB_envinfo info;
  if (int rc = mdb_env_info(env->raw(), &info); rc != 0)
    return result::failure(
      lmdb_env::describe("lmdb_inspect::environment", "mdb_env_info", rc));
  env_figures out;
  out.map_size = info.me_mapsize;
  out.page_size = pages->page_size;
  out.high_water = pages->high_water;
  out.free_pages = pages->free;
  out.last_txn = info.me_last_txnid;
  out.disk_bytes = env->disk_bytes();
  return result{out};
}

store_status add_delete_hook(session_store& s, const std::string& db,
                             const std::string& fail_with) {
  auto* l = dynamic_cast<lmdb_session_store*>(&s);
  if (l == nullptr) {
    store_status err;
    (void) env_of(s, "lmdb_inspect::add_delete_hook", err);
    return err;
  }
  l->add_delete_hook([db, fail_with](MDB_txn* txn, const std::string& id,
                                     std::string& error) {
    if (!fail_with.empty()) {
      error = fail_with;
      return lmdb_env::user_error;
    }
    MDB_dbi dbi = 0;
    int rc = open_db(txn, db, MDB_CREATE, dbi, error);
    if (rc != 0)
      return rc;
    std::vector<std::string> keys;
    rc = store_detail::scan_prefix(txn, dbi, store_detail::sub_key(id, ""),
                                   [&](std::string_view k, std::string_view) {
                                     keys.emplace_back(k);
                                     return 0;
                                   });
    keys.push_back(id);
    for (size_t i = 0; rc == 0 && i < keys.size(); ++i)
      if ((rc = lmdb_env::del(txn, dbi, keys[i])) == MDB_NOTFOUND)
        rc = 0;
    if (rc != 0)
      error = "delete the rows of '" + id + "' in " + db;
    return rc;
  });
  return {};
}

store_status create_bare_environment(const std::string& dir) {
  lmdb_options lo;
  lo.dir = dir;
  auto env = lmdb_env::open(lo);
  return env ? store_status{} : env.get_status();
}

} // namespace mibyan::lmdb_inspect
