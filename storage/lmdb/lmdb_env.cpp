#include "storage/lmdb/lmdb_env.hpp"

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>

#include <sys/stat.h>
#include <unistd.h>

#include "base/runtime_metrics.hpp"
#include "storage/lmdb/store_verify.hpp"

namespace mibyan {

namespace {

// The directories whose environment is open in this process. LMDB's POSIX
// locks are per process: opening an environment twice and closing one copy
// silently drops the locks of the other.
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}

std::set<std::string>& registry() {
  static std::set<std::string> s;
  return s;
}

std::string errno_text(int err) {
  return std::strerror(err);
}

// Creates `dir` and missing parents; the last component gets 0700.
std::string make_dirs(const std::string& dir) {
  std::string partial;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = dir.find('/', pos + 1);
    partial = dir.substr(0, pos);
    if (partial.empty())
      continue;
    if (::mkdir(partial.c_str(), 0700) != 0 && errno != EEXIST)
      return "cannot create directory " + partial + ": " + errno_text(errno);
  }
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0)
    return "cannot access " + dir + ": " + errno_text(errno);
  if (!S_ISDIR(st.st_mode))
    return dir + " exists and is not a directory";
  return {};
}

} // namespace

store_result<std::unique_ptr<lmdb_env>>
lmdb_env::open(const lmdb_options& opts) {
  using result = store_result<std::unique_ptr<lmdb_env>>;
  if (opts.dir.empty())
    return result::failure("lmdb: no directory given for the environment");
  if (!opts.read_only) {
    if (auto err = make_dirs(opts.dir); !err.empty())
      return result::failure("lmdb: " + err);
  }
  char resolved[PATH_MAX];
  if (::realpath(opts.dir.c_str(), resolved) == nullptr) {
    int err = errno;
    return result::failure(err == ENOENT ? status_code::not_found
                                         : status_code::internal,
                           "lmdb: cannot open " + opts.dir + ": "
                             + errno_text(err));
  }
  std::string key = resolved;
  {
    std::lock_guard<std::mutex> guard{registry_mutex()};
    if (!registry().insert(key).second)
      return result::failure("lmdb: the environment in " + key
                             + " is already open in this process (one "
                               "MDB_env per process; share the store)");
  }
  // LMDB trusts its files; check them first (storage/lmdb/store_verify.hpp).
  // Another process creating the environment writes its two meta pages
  // while this check may read them: a problem seen is checked again a few
  // times before it is reported, damage persists, a creation does not.
  auto err = verify_lmdb_files(key);
  for (int again = 0; again < 5 && !err.empty(); ++again) {
    std::this_thread::sleep_for(std::chrono::milliseconds{20});
    err = verify_lmdb_files(key);
  }
  if (!err.empty()) {
    std::lock_guard<std::mutex> guard{registry_mutex()};
    registry().erase(key);
    return result::failure("lmdb: " + err);
  }
  std::unique_ptr<lmdb_env> self{new lmdb_env};
  self->registry_key_ = key;  // the destructor unregisters from here on
  self->dir_ = key;
  self->read_only_ = opts.read_only;
  self->max_map_size_ = std::max(opts.max_map_size, opts.map_size);
  int rc = mdb_env_create(&self->env_);
  if (rc != 0) {
    self->env_ = nullptr;
    return result::failure(describe("lmdb", "mdb_env_create", rc));
  }
  if ((rc = mdb_env_set_maxdbs(self->env_, opts.max_dbs)) != 0)
    return result::failure(describe("lmdb", "mdb_env_set_maxdbs", rc));
  if ((rc = mdb_env_set_mapsize(self->env_, opts.map_size)) != 0)
    return result::failure(describe("lmdb", "mdb_env_set_mapsize", rc));
  unsigned flags = MDB_NOTLS;
  if (opts.read_only)
    flags |= MDB_RDONLY;
  if ((rc = mdb_env_open(self->env_, key.c_str(), flags, 0600)) != 0) {
    auto step = "mdb_env_open(" + key + ")";
    if (rc == ENOENT)
      return result::failure(status_code::not_found,
                             "lmdb: no session store in " + key
                               + " (data.mdb missing)");
    return result::failure(describe("lmdb", step, rc));
  }
  // Reader slots left behind by processes that died (SIGKILL) would pin
  // old pages forever; clear them.
  int dead = 0;
  mdb_reader_check(self->env_, &dead);
  // A larger map set by another process wins (set_mapsize(0) adopts it).
  MDB_envinfo info;
  if (mdb_env_info(self->env_, &info) == 0
      && info.me_mapsize < opts.map_size && !opts.read_only)
    mdb_env_set_mapsize(self->env_, opts.map_size);
  return result{std::move(self)};
}

lmdb_env::~lmdb_env() {
  if (env_ != nullptr)
    mdb_env_close(env_);
  if (!registry_key_.empty()) {
    std::lock_guard<std::mutex> guard{registry_mutex()};
    registry().erase(registry_key_);
  }
}

store_result<MDB_dbi> lmdb_env::open_dbi(const char* name, unsigned flags) {
  MDB_txn* txn = nullptr;
  int rc = mdb_txn_begin(env_, nullptr, read_only_ ? MDB_RDONLY : 0, &txn);
  if (rc != 0)
    return store_result<MDB_dbi>::failure(
      describe("lmdb", std::string{"open database "} + name, rc));
  MDB_dbi dbi = 0;
  rc = mdb_dbi_open(txn, name, flags | (read_only_ ? 0 : MDB_CREATE), &dbi);
  if (rc != 0) {
    mdb_txn_abort(txn);
    if (rc == MDB_NOTFOUND)
      return store_result<MDB_dbi>::failure(
        std::string{"lmdb: database '"} + name + "' does not exist in "
        + dir_ + " (store never written by this version?)");
    return store_result<MDB_dbi>::failure(
      describe("lmdb", std::string{"open database "} + name, rc));
  }
  if ((rc = mdb_txn_commit(txn)) != 0)
    return store_result<MDB_dbi>::failure(
      describe("lmdb", std::string{"open database "} + name, rc));
  return store_result<MDB_dbi>{dbi};
}

store_status lmdb_env::setup(const txn_fn& fn, const char* what) {
  if (!read_only_)
    return write(fn, what);
  MDB_txn* txn = nullptr;
  int rc = mdb_txn_begin(env_, nullptr, MDB_RDONLY, &txn);
  if (rc != 0)
    return store_status::failure(code_of(rc),
                                 describe(what, "begin read transaction", rc));
  std::string error;
  rc = fn(txn, error);
  if (rc != 0) {
    mdb_txn_abort(txn);
    if (rc == user_error || rc == missing_error)
      return store_status::failure(code_of(rc),
                                   std::string{what} + ": " + error);
    return store_status::failure(code_of(rc), describe(what, error, rc));
  }
  // Committing a read transaction keeps the handles it opened.
  if ((rc = mdb_txn_commit(txn)) != 0)
    return store_status::failure(code_of(rc), describe(what, "commit", rc));
  return {};
}

store_status lmdb_env::grow(uint64_t failed_size) {
  std::unique_lock<std::shared_mutex> guard{resize_mutex_};
  MDB_envinfo info;
  int rc = mdb_env_info(env_, &info);
  if (rc != 0)
    return store_status::failure(describe("lmdb", "mdb_env_info", rc));
  if (info.me_mapsize > failed_size)
    return {};  // another thread grew it already
  uint64_t next = static_cast<uint64_t>(info.me_mapsize) * 2;
  if (next > max_map_size_)
    return store_status::failure(
      "lmdb: the session store is full (map size "
      + std::to_string(info.me_mapsize) + " bytes reached the limit of "
      + std::to_string(max_map_size_) + "); delete old sessions");
  if ((rc = mdb_env_set_mapsize(env_, next)) != 0)
    return store_status::failure(describe("lmdb", "mdb_env_set_mapsize", rc));
  return {};
}

store_status lmdb_env::write(const txn_fn& fn, const char* what) {
  if (read_only_)
    return store_status::failure(std::string{what}
                                 + ": the store was opened read-only");
  for (int attempt = 0; attempt < 16; ++attempt) {
    int rc = 0;
    std::string error;
    std::string step;
    uint64_t size_before = 0;
    {
      std::shared_lock<std::shared_mutex> guard{resize_mutex_};
      size_before = map_size();
      MDB_txn* txn = nullptr;
      rc = mdb_txn_begin(env_, nullptr, 0, &txn);
      if (rc == 0) {
        rc = fn(txn, error);
        if (rc == 0) {
          auto t0 = std::chrono::steady_clock::now();
          rc = mdb_txn_commit(txn);
          if (rc == 0)
            metrics::observe_store_commit(
              std::chrono::duration<double>(std::chrono::steady_clock::now()
                                            - t0)
                .count());
          if (rc != 0)
            step = "commit";
        } else {
          mdb_txn_abort(txn);
        }
        if (rc == 0)
          return {};
      } else {
        step = "begin transaction";
      }
    }
    if (rc == MDB_MAP_RESIZED) {
      // Another process grew the map: adopt its size and retry.
      std::unique_lock<std::shared_mutex> guard{resize_mutex_};
      mdb_env_set_mapsize(env_, 0);
      continue;
    }
    if (rc == MDB_MAP_FULL) {
      if (auto st = grow(size_before); !st)
        return store_status::failure(st.code,
                                     std::string{what} + ": " + st.error);
      continue;
    }
    if (rc == user_error || rc == missing_error)
      return store_status::failure(code_of(rc),
                                   std::string{what} + ": " + error);
    return store_status::failure(
      code_of(rc), describe(what, step.empty() ? error : step, rc));
  }
  return store_status::failure(std::string{what}
                               + ": gave up after repeated map resizes");
}

store_status lmdb_env::read(const txn_fn& fn, const char* what) const {
  for (int attempt = 0; attempt < 4; ++attempt) {
    int rc = 0;
    std::string error;
    {
      std::shared_lock<std::shared_mutex> guard{resize_mutex_};
      MDB_txn* txn = nullptr;
      rc = mdb_txn_begin(env_, nullptr, MDB_RDONLY, &txn);
      if (rc == 0) {
        rc = fn(txn, error);
        mdb_txn_abort(txn);
        if (rc == 0)
          return {};
      } else if (rc != MDB_MAP_RESIZED) {
        return store_status::failure(
          describe(what, "begin read transaction", rc));
      }
    }
    if (rc == MDB_MAP_RESIZED) {
      std::unique_lock<std::shared_mutex> guard{resize_mutex_};
      mdb_env_set_mapsize(env_, 0);
      continue;
    }
    if (rc == user_error || rc == missing_error)
      return store_status::failure(code_of(rc),
                                   std::string{what} + ": " + error);
    return store_status::failure(code_of(rc), describe(what, error, rc));
  }
  return store_status::failure(std::string{what}
                               + ": the map kept being resized");
}

uint64_t lmdb_env::map_size() const {
  MDB_envinfo info;
  if (mdb_env_info(env_, &info) != 0)
    return 0;
  return info.me_mapsize;
}

uint64_t lmdb_env::used_bytes() const {
  auto p = pages();
  return p ? p->used() * p->page_size : 0;
}

uint64_t lmdb_env::disk_bytes() const {
  struct stat st;
  if (::stat((dir_ + "/data.mdb").c_str(), &st) != 0)
    return 0;
  return static_cast<uint64_t>(st.st_blocks) * 512;
}

store_result<lmdb_env::page_counts> lmdb_env::pages() const {
  page_counts out;
  auto st = read(
    [&](MDB_txn* txn, std::string& error) {
      MDB_envinfo info;
      MDB_stat ms;
      int rc = mdb_env_info(env_, &info);
      if (rc == 0)
        rc = mdb_env_stat(env_, &ms);
      if (rc != 0) {
        error = "mdb_env_info";
        return rc;
      }
      out.page_size = ms.ms_psize;
      out.high_water = static_cast<uint64_t>(info.me_last_pgno) + 1;
      // The free list (database 0): each record is an ID list whose first
      // element is its length.
      MDB_cursor* cur = nullptr;
      if ((rc = mdb_cursor_open(txn, 0, &cur)) != 0) {
        error = "mdb_cursor_open(free list)";
        return rc;
      }
      MDB_val k, v;
      while ((rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) == 0)
        if (v.mv_size >= sizeof(size_t))
          out.free += static_cast<const size_t*>(v.mv_data)[0];
      mdb_cursor_close(cur);
      return rc == MDB_NOTFOUND ? 0 : rc;
    },
    "page counts");
  if (!st)
    return store_result<page_counts>::failure(st.code, st.error);
  return out;
}

int lmdb_env::get(MDB_txn* txn, MDB_dbi dbi, std::string_view key,
                  std::string_view& out) {
  MDB_val k = val(key);
  MDB_val v;
  int rc = mdb_get(txn, dbi, &k, &v);
  if (rc == 0)
    out = view(v);
  return rc;
}

int lmdb_env::put(MDB_txn* txn, MDB_dbi dbi, std::string_view key,
                  std::string_view value, unsigned flags) {
  MDB_val k = val(key);
  MDB_val v = val(value);
  return mdb_put(txn, dbi, &k, &v, flags);
}

int lmdb_env::del(MDB_txn* txn, MDB_dbi dbi, std::string_view key) {
  MDB_val k = val(key);
  return mdb_del(txn, dbi, &k, nullptr);
}

status_code lmdb_env::code_of(int rc) {
  switch (rc) {
    case 0: return status_code::ok;
    case user_error: return status_code::invalid_argument;
    case missing_error: return status_code::not_found;
    case MDB_NOTFOUND: return status_code::not_found;
    case MDB_KEYEXIST: return status_code::already_exists;
    case MDB_MAP_FULL:
    case MDB_DBS_FULL:
    case MDB_READERS_FULL:
    case MDB_TXN_FULL:
    case ENOSPC:
    case EDQUOT:
    case ENOMEM: return status_code::resource_exhausted;
    case MDB_CORRUPTED:
    case MDB_PAGE_NOTFOUND:
    case MDB_INVALID:
    case MDB_VERSION_MISMATCH:
    case MDB_BAD_DBI:
    case EIO: return status_code::data_corrupt;
    case EACCES:
    case EPERM:
    case EROFS: return status_code::permission_denied;
    case EAGAIN:
    case EBUSY: return status_code::unavailable;
    default: return status_code::internal;
  }
}

std::string lmdb_env::describe(const char* what, const std::string& step,
                               int rc) {
  std::string out = what;
  if (!step.empty())
    out += ": " + step;
  out += ": ";
  out += mdb_strerror(rc);
  if (rc == MDB_MAP_FULL || rc == ENOSPC)
    out += " (free disk space or delete old sessions)";
  return out;
}

} // namespace mibyan
