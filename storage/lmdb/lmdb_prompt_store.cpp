#include "storage/lmdb/lmdb_prompt_store.hpp"

#include <vector>

#include <lmdb.h>

#include "base/crypto.hpp"
#include "storage/lmdb/lmdb_env.hpp"
#include "storage/lmdb/lmdb_session_store.hpp"
#include "storage/lmdb/lmdb_store_detail.hpp"

namespace mibyan {

namespace {

class lmdb_prompt_store final : public prompt_store {
public:
  explicit lmdb_prompt_store(lmdb_env& env) : env_(env) {}

  store_result<std::string> put(const std::string& session_id,
                                const std::string& text) override;
  store_status reference(const std::string& session_id,
                         const std::string& hash) override;
  store_result<std::string>
  hash_of(const std::string& session_id) const override;
  store_result<std::string> get(const std::string& hash) const override;
  store_status drop(const std::string& session_id) override;
  store_result<size_t> collect() override;
  store_result<size_t> count() const override;

  lmdb_env& env_;
  bool present_ = false; // false: a read-only store without the databases
  MDB_dbi prompts_ = 0;
  MDB_dbi session_prompts_ = 0;
  MDB_dbi refs_ = 0;
};

using store_detail::scan_prefix;

constexpr char record_version = 1;

struct dbis {
  MDB_dbi prompts = 0;
  MDB_dbi session_prompts = 0;
  MDB_dbi refs = 0;
};

std::string ref_key(std::string_view hash, std::string_view sid) {
  std::string k;
  k.reserve(hash.size() + 1 + sid.size());
  k.append(hash);
  k.push_back('\0');
  k.append(sid);
  return k;
}

bool has_refs(MDB_txn* txn, const dbis& d, std::string_view hash, int& rc) {
  bool any = false;
  rc = scan_prefix(txn, d.refs, ref_key(hash, ""),
                   [&](std::string_view, std::string_view) {
                     any = true;
                     return 1; // stop
                   });
  if (rc == 1)
    rc = 0;
  return any;
}

// Drops the reference of `sid`; deletes its prompt when it was the last.
int unref_txn(MDB_txn* txn, const dbis& d, const std::string& sid,
              std::string& error) {
  std::string_view found;
  int rc = lmdb_env::get(txn, d.session_prompts, sid, found);
  if (rc == MDB_NOTFOUND)
    return 0;
  if (rc != 0) {
    error = "read the session's prompt reference";
    return rc;
  }
  std::string hash{found};
  if ((rc = lmdb_env::del(txn, d.session_prompts, sid)) != 0) {
    error = "delete the session's prompt reference";
    return rc;
  }
  rc = lmdb_env::del(txn, d.refs, ref_key(hash, sid));
  if (rc != 0 && rc != MDB_NOTFOUND) {
    error = "delete the prompt's reference entry";
    return rc;
  }
  bool still = has_refs(txn, d, hash, rc);
  if (rc != 0) {
    error = "read the prompt's references";
    return rc;
  }
  if (!still) {
    rc = lmdb_env::del(txn, d.prompts, hash);
    if (rc != 0 && rc != MDB_NOTFOUND) {
      error = "delete the unreferenced prompt";
      return rc;
    }
  }
  return 0;
}

// Makes `hash` (stored) the prompt of `sid`.
int ref_txn(MDB_txn* txn, const dbis& d, const std::string& sid,
            const std::string& hash, std::string& error) {
  std::string_view old;
  int rc = lmdb_env::get(txn, d.session_prompts, sid, old);
  if (rc == 0 && old == hash)
    return 0;
  if (rc != 0 && rc != MDB_NOTFOUND) {
    error = "read the session's prompt reference";
    return rc;
  }
  if (rc == 0 && (rc = unref_txn(txn, d, sid, error)) != 0)
    return rc;
  if ((rc = lmdb_env::put(txn, d.session_prompts, sid, hash)) != 0
      || (rc = lmdb_env::put(txn, d.refs, ref_key(hash, sid), "")) != 0) {
    error = "write the prompt reference";
    return rc;
  }
  return 0;
}

int open_by_name(MDB_txn* txn, dbis& d) {
  int rc = mdb_dbi_open(txn, "prompts", 0, &d.prompts);
  if (rc == 0)
    rc = mdb_dbi_open(txn, "session_prompts", 0, &d.session_prompts);
  if (rc == 0)
    rc = mdb_dbi_open(txn, "prompt_refs", 0, &d.refs);
  return rc;
}

} // namespace

store_result<std::string> lmdb_prompt_store::put(const std::string& sid,
                                                 const std::string& text) {
  if (sid.empty())
    return store_result<std::string>::failure(
      status_code::invalid_argument, "store prompt: empty session id");
  if (!present_)
    return store_result<std::string>::failure(
      status_code::permission_denied, "store prompt: the store is read-only");
  auto hash = sha256_hex(text);
  dbis d{prompts_, session_prompts_, refs_};
  auto st = env_.write(
    [&](MDB_txn* txn, std::string& error) {
      std::string_view existing;
      int rc = lmdb_env::get(txn, d.prompts, hash, existing);
      if (rc == MDB_NOTFOUND) {
        std::string rec;
        rec.reserve(text.size() + 1);
        rec.push_back(record_version);
        rec += text;
        rc = lmdb_env::put(txn, d.prompts, hash, rec);
      }
      if (rc != 0) {
        error = "write the prompt";
        return rc;
      }
      return ref_txn(txn, d, sid, hash, error);
    },
    "store prompt");
  if (!st)
    return st;
  return store_result<std::string>{hash};
}

store_status lmdb_prompt_store::reference(const std::string& sid,
                                          const std::string& hash) {
  if (sid.empty() || hash.empty())
    return store_status::failure(status_code::invalid_argument,
                                 "reference prompt: empty session id or hash");
  if (!present_)
    return store_status::failure(status_code::permission_denied,
                                 "reference prompt: the store is read-only");
  dbis d{prompts_, session_prompts_, refs_};
  return env_.write(
    [&](MDB_txn* txn, std::string& error) {
      std::string_view existing;
      int rc = lmdb_env::get(txn, d.prompts, hash, existing);
      if (rc == MDB_NOTFOUND) {
        error = "no prompt " + hash + " is stored";
        return lmdb_env::missing_error;
      }
      if (rc != 0) {
        error = "read the prompt";
        return rc;
      }
      return ref_txn(txn, d, sid, hash, error);
    },
    "reference prompt");
}

store_result<std::string>
lmdb_prompt_store::hash_of(const std::string& sid) const {
  if (!present_)
    return store_result<std::string>::failure(
      status_code::not_found, "session " + sid + " has no stored prompt");
  std::string out;
  auto st = env_.read(
    [&](MDB_txn* txn, std::string& error) {
      std::string_view v;
      int rc = lmdb_env::get(txn, session_prompts_, sid, v);
      if (rc == MDB_NOTFOUND) {
        error = "session " + sid + " has no stored prompt";
        return lmdb_env::missing_error;
      }
      out = std::string{v};
      return rc;
    },
    "read prompt reference");
  if (!st)
    return st;
  return store_result<std::string>{std::move(out)};
}

store_result<std::string>
lmdb_prompt_store::get(const std::string& hash) const {
  if (!present_)
    return store_result<std::string>::failure(
      status_code::not_found, "prompt " + hash + " is not stored");
  std::string out;
  bool bad = false;
  auto st = env_.read(
    [&](MDB_txn* txn, std::string& error) {
      std::string_view v;
      int rc = lmdb_env::get(txn, prompts_, hash, v);
      if (rc == MDB_NOTFOUND) {
        error = "prompt " + hash + " is not stored";
        return lmdb_env::missing_error;
      }
      if (rc != 0)
        return rc;
      if (v.empty() || v[0] != record_version) {
        bad = true;
        error = "prompt " + hash + " has an unknown record version";
        return lmdb_env::user_error;
      }
      out = std::string{v.substr(1)};
      return 0;
    },
    "read prompt");
  if (bad)
    return store_result<std::string>::failure(status_code::data_corrupt,
                                              st.error);
  if (!st)
    return st;
  if (sha256_hex(out) != hash)
    return store_result<std::string>::failure(
      status_code::data_corrupt,
      "read prompt: prompt " + hash + " does not match its hash");
  return store_result<std::string>{std::move(out)};
}

store_status lmdb_prompt_store::drop(const std::string& sid) {
  if (!present_)
    return {};
  dbis d{prompts_, session_prompts_, refs_};
  return env_.write(
    [&](MDB_txn* txn, std::string& error) {
      return unref_txn(txn, d, sid, error);
    },
    "drop prompt reference");
}

store_result<size_t> lmdb_prompt_store::collect() {
  if (!present_)
    return store_result<size_t>{size_t{0}};
  dbis d{prompts_, session_prompts_, refs_};
  // A read transaction first: a store with nothing to collect (the usual
  // case at start-up) costs no write.
  bool any = false;
  auto seen = env_.read(
    [&](MDB_txn* txn, std::string& error) {
      MDB_dbi sessions = 0;
      int rc = mdb_dbi_open(txn, "sessions", 0, &sessions);
      if (rc == 0)
        rc = scan_prefix(txn, d.session_prompts, "",
                         [&](std::string_view k, std::string_view) {
                           std::string_view row;
                           int r = lmdb_env::get(txn, sessions, k, row);
                           any = any || r == MDB_NOTFOUND;
                           return r == MDB_NOTFOUND ? 1 : r;
                         });
      else if (rc == MDB_NOTFOUND)
        rc = 0;
      if (rc == 1)
        rc = 0;
      if (rc == 0 && !any)
        rc = scan_prefix(txn, d.prompts, "",
                         [&](std::string_view k, std::string_view) {
                           int r = 0;
                           any = !has_refs(txn, d, k, r);
                           return r != 0 ? r : (any ? 1 : 0);
                         });
      if (rc == 1)
        rc = 0;
      if (rc != 0)
        error = "look for unreferenced prompts";
      return rc;
    },
    "collect prompts");
  if (!seen)
    return seen;
  if (!any)
    return store_result<size_t>{size_t{0}};
  size_t removed = 0;
  auto st = env_.write(
    [&](MDB_txn* txn, std::string& error) {
      removed = 0;
      // Prompts removed in all: by dropping a leftover reference (its
      // last) or as unreferenced.
      MDB_stat before{};
      if (int rc = mdb_stat(txn, d.prompts, &before); rc != 0) {
        error = "count the prompts";
        return rc;
      }
      MDB_dbi sessions = 0;
      int rc = mdb_dbi_open(txn, "sessions", 0, &sessions);
      bool check_sessions = rc == 0;
      std::vector<std::string> gone;
      if (check_sessions) {
        rc = scan_prefix(txn, d.session_prompts, "",
                         [&](std::string_view k, std::string_view) {
                           std::string_view row;
                           int r = lmdb_env::get(txn, sessions, k, row);
                           if (r == MDB_NOTFOUND)
                             gone.emplace_back(k);
                           return r == MDB_NOTFOUND ? 0 : r;
                         });
        if (rc != 0) {
          error = "read the prompt references";
          return rc;
        }
      }
      for (auto& sid : gone)
        if ((rc = unref_txn(txn, d, sid, error)) != 0)
          return rc;
      std::vector<std::string> hashes;
      rc = scan_prefix(txn, d.prompts, "",
                       [&](std::string_view k, std::string_view) {
                         hashes.emplace_back(k);
                         return 0;
                       });
      if (rc != 0) {
        error = "read the prompts";
        return rc;
      }
      for (auto& h : hashes) {
        bool used = has_refs(txn, d, h, rc);
        if (rc != 0) {
          error = "read the prompt's references";
          return rc;
        }
        if (used)
          continue;
        if ((rc = lmdb_env::del(txn, d.prompts, h)) != 0) {
          error = "delete an unreferenced prompt";
          return rc;
        }
      }
      MDB_stat after{};
      if ((rc = mdb_stat(txn, d.prompts, &after)) != 0) {
        error = "count the prompts";
        return rc;
      }
      removed = static_cast<size_t>(before.ms_entries - after.ms_entries);
      return 0;
    },
    "collect prompts");
  if (!st)
    return st;
  return store_result<size_t>{removed};
}

store_result<size_t> lmdb_prompt_store::count() const {
  if (!present_)
    return store_result<size_t>{size_t{0}};
  MDB_stat ms{};
  auto st = env_.read(
    [&](MDB_txn* txn, std::string&) { return mdb_stat(txn, prompts_, &ms); },
    "count prompts");
  if (!st)
    return st;
  return store_result<size_t>{static_cast<size_t>(ms.ms_entries)};
}

store_result<std::unique_ptr<prompt_store>>
open_lmdb_prompt_store(lmdb_session_store& store) {
  auto& env = store.env();
  auto s = std::make_unique<lmdb_prompt_store>(env);
  auto* p = s.get();
  auto opened = [&]() -> store_status {
    // The usual case, the databases exist: a read transaction opens them,
    // so a start costs no write (and no fsync).
    MDB_txn* txn = nullptr;
    if (mdb_txn_begin(env.raw(), nullptr, MDB_RDONLY, &txn) == 0) {
      dbis d;
      if (open_by_name(txn, d) == 0 && mdb_txn_commit(txn) == 0) {
        p->prompts_ = d.prompts;
        p->session_prompts_ = d.session_prompts;
        p->refs_ = d.refs;
        p->present_ = true;
        return {};
      }
      mdb_txn_abort(txn);
    }
    unsigned create = env.read_only() ? 0 : MDB_CREATE;
    return env.setup(
      [&](MDB_txn* txn, std::string& error) {
        int rc = mdb_dbi_open(txn, "prompts", create, &p->prompts_);
        if (rc == MDB_NOTFOUND && create == 0)
          return 0; // a read-only store written before prompts were stored
        if (rc == 0)
          rc = mdb_dbi_open(txn, "session_prompts", create,
                            &p->session_prompts_);
        if (rc == 0)
          rc = mdb_dbi_open(txn, "prompt_refs", create, &p->refs_);
        if (rc != 0) {
          error = "open the prompt databases";
          return rc;
        }
        p->present_ = true;
        return 0;
      },
      "open prompt store");
  }();
  if (!opened)
    return opened;
  if (p->present_) {
    dbis d{p->prompts_, p->session_prompts_, p->refs_};
    // The hook holds the handles, not the prompt store: it stays valid
    // however long the session store lives.
    store.add_delete_hook(
      [d](MDB_txn* txn, const std::string& id, std::string& error) {
        return unref_txn(txn, d, id, error);
      });
  }
  return store_result<std::unique_ptr<prompt_store>>{
    std::unique_ptr<prompt_store>{std::move(s)}};
}

} // namespace mibyan
