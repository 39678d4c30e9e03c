// The LMDB checkpoint store (storage/checkpoint_store.hpp), and
// open_checkpoint_store, which picks the backend's checkpoint store (this
// one for an LMDB session store, storage/postgres/ for PostgreSQL).
//
// Database "kernel_checkpoints" in the session store's environment:
//   <session> 0x00 'h'                      -> be64 seq, be64 chunks, be64 bytes
//   <session> 0x00 'c' be64(seq) be64(i)    -> chunk i
// One write transaction writes the new chunks, moves the head and drops
// the old chunks, so a crash leaves either checkpoint whole.
#include "storage/lmdb/lmdb_checkpoint_store.hpp"

#include <vector>

#include "storage/byte_codec.hpp"
#include "storage/lmdb/lmdb_env.hpp"
#include "storage/lmdb/lmdb_session_store.hpp"
#include "storage/postgres/pg_session_store.hpp"
#include "storage/postgres/pg_side_stores.hpp"

namespace mibyan {

namespace {

constexpr const char* db_name = "kernel_checkpoints";

// Drops the checkpoints of `session` inside `txn` (a write transaction of
// the session store's environment): 0 or an LMDB code, with `error` naming
// the step, as lmdb_env::write's step functions answer.
int delete_checkpoints_txn(MDB_txn* txn, const std::string& session,
                           std::string& error);

// Session ids are checked by the session store; here only what the key
// layout needs: not empty, no NUL (the separator), a bounded length.
std::string check_session_id(const std::string& id) {
  if (id.empty())
    return "session id is empty";
  if (id.size() > 512)
    return "session id is longer than 512 bytes";
  if (id.find('\0') != std::string::npos)
    return "session id contains NUL";
  return {};
}

std::string prefix(const std::string& session) {
  std::string k = session;
  k.push_back('\0');
  return k;
}

std::string head_key(const std::string& session) {
  return prefix(session) + "h";
}

std::string chunk_key(const std::string& session, uint64_t seq, uint64_t i) {
  auto k = prefix(session) + "c";
  codec::put_be64(k, seq);
  codec::put_be64(k, i);
  return k;
}

struct head {
  uint64_t seq = 0, chunks = 0, bytes = 0;
};

int read_head(MDB_txn* txn, MDB_dbi dbi, const std::string& session,
              head& h, bool& found) {
  std::string_view v;
  int rc = lmdb_env::get(txn, dbi, head_key(session), v);
  found = false;
  if (rc == MDB_NOTFOUND)
    return 0;
  if (rc != 0)
    return rc;
  if (v.size() != 24)
    return MDB_CORRUPTED;
  h.seq = codec::read_be64(v.data());
  h.chunks = codec::read_be64(v.data() + 8);
  h.bytes = codec::read_be64(v.data() + 16);
  found = true;
  return 0;
}

// Drops every key of `session` (chunks and head): the keys are collected
// with a cursor first, then deleted.
int drop_all(MDB_txn* txn, MDB_dbi dbi, const std::string& session,
             std::string& error) {
  MDB_cursor* cur = nullptr;
  int rc = mdb_cursor_open(txn, dbi, &cur);
  if (rc != 0) {
    error = "open cursor";
    return rc;
  }
  auto p = prefix(session);
  std::vector<std::string> keys;
  MDB_val k = lmdb_env::val(p), v{};
  rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
  while (rc == 0) {
    auto key = lmdb_env::view(k);
    if (key.substr(0, p.size()) != p)
      break;
    keys.emplace_back(key);
    rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
  }
  mdb_cursor_close(cur);
  if (rc != 0 && rc != MDB_NOTFOUND) {
    error = "list checkpoint chunks";
    return rc;
  }
  for (auto& key : keys)
    if ((rc = lmdb_env::del(txn, dbi, key)) != 0 && rc != MDB_NOTFOUND) {
      error = "delete checkpoint chunk";
      return rc;
    }
  return 0;
}

class lmdb_checkpoint_store final : public checkpoint_store {
public:
  lmdb_checkpoint_store(lmdb_env& env, MDB_dbi dbi, std::shared_ptr<void> owner)
      : owner_(std::move(owner)), env_(env), dbi_(dbi) {}

  store_status put(const std::string& session, uint64_t seq,
                   std::string_view bytes) override {
    if (auto err = check_session_id(session); !err.empty())
      return store_status::failure(status_code::invalid_argument,
                                   "checkpoint put: " + err);
    return env_.write(
      [&](MDB_txn* txn, std::string& error) {
        head old;
        bool found = false;
        if (int rc = read_head(txn, dbi_, session, old, found); rc != 0) {
          error = "read head";
          return rc;
        }
        if (found && seq <= old.seq)
          return 0; // a newer one is stored already
        uint64_t n = 0;
        for (size_t off = 0; off < bytes.size() || n == 0;
             off += checkpoint_chunk_bytes, ++n) {
          auto piece = bytes.substr(off, checkpoint_chunk_bytes);
          if (int rc = lmdb_env::put(txn, dbi_, chunk_key(session, seq, n),
                                     piece);
              rc != 0) {
            error = "write chunk";
            return rc;
          }
          if (bytes.empty())
            break;
        }
        if (bytes.empty())
          n = 1;
        std::string h;
        codec::put_be64(h, seq);
        codec::put_be64(h, n);
        codec::put_be64(h, bytes.size());
        if (int rc = lmdb_env::put(txn, dbi_, head_key(session), h); rc != 0) {
          error = "write head";
          return rc;
        }
        for (uint64_t i = 0; found && i < old.chunks; ++i) {
          int rc = lmdb_env::del(txn, dbi_, chunk_key(session, old.seq, i));
          if (rc != 0 && rc != MDB_NOTFOUND) {
            error = "drop the previous checkpoint";
            return rc;
          }
        }
        return 0;
      },
      "checkpoint put");
  }

  store_result<std::optional<stored_checkpoint>>
  latest(const std::string& session) override {
    if (auto err = check_session_id(session); !err.empty())
      return store_result<std::optional<stored_checkpoint>>::failure(
        status_code::invalid_argument, "checkpoint latest: " + err);
    std::optional<stored_checkpoint> out;
    auto st = env_.read(
      [&](MDB_txn* txn, std::string& error) {
        head h;
        bool found = false;
        if (int rc = read_head(txn, dbi_, session, h, found); rc != 0) {
          error = "read head";
          return rc;
        }
        if (!found)
          return 0;
        stored_checkpoint c;
        c.session = session;
        c.seq = h.seq;
        c.bytes.reserve(h.bytes);
        for (uint64_t i = 0; i < h.chunks; ++i) {
          std::string_view v;
          if (int rc = lmdb_env::get(txn, dbi_, chunk_key(session, h.seq, i),
                                     v);
              rc != 0) {
            error = "read chunk " + std::to_string(i);
            return rc == MDB_NOTFOUND ? static_cast<int>(MDB_CORRUPTED) : rc;
          }
          c.bytes.append(v.data(), v.size());
        }
        if (c.bytes.size() != h.bytes) {
          error = "size check";
          return static_cast<int>(MDB_CORRUPTED);
        }
        out = std::move(c);
        return 0;
      },
      "checkpoint latest");
    if (!st)
      return st;
    return out;
  }

  store_status remove(const std::string& session) override {
    if (auto err = check_session_id(session); !err.empty())
      return store_status::failure(status_code::invalid_argument,
                                   "checkpoint remove: " + err);
    return env_.write(
      [&](MDB_txn* txn, std::string& error) {
        return delete_checkpoints_txn(txn, session, error);
      },
      "checkpoint remove");
  }

private:
  std::shared_ptr<void> owner_; // keeps env_ alive
  lmdb_env& env_;
  MDB_dbi dbi_;
};

} // namespace

store_result<std::unique_ptr<checkpoint_store>>
open_lmdb_checkpoint_store(lmdb_env& env, std::shared_ptr<void> owner) {
  auto dbi = env.open_dbi(db_name);
  if (!dbi)
    return dbi.get_status();
  return std::unique_ptr<checkpoint_store>(
    new lmdb_checkpoint_store(env, *dbi, std::move(owner)));
}

store_result<std::unique_ptr<checkpoint_store>>
open_checkpoint_store(const std::shared_ptr<session_store>& store) {
  // PostgreSQL: pg_session_store::delete_session drops the checkpoints.
  if (auto* pg = dynamic_cast<pg_session_store*>(store.get()))
    return open_pg_checkpoint_store(*pg, store);
  auto* lmdb = dynamic_cast<lmdb_session_store*>(store.get());
  if (lmdb == nullptr)
    return store_result<std::unique_ptr<checkpoint_store>>::failure(
      status_code::unavailable,
      std::string{"the "} + store->backend()
        + " session store keeps no kernel checkpoints in this build");
  auto dbi = lmdb->env().open_dbi(db_name);
  if (!dbi)
    return dbi.get_status();
  // delete_session drops the session's checkpoints in its transaction.
  lmdb->add_delete_hook(
    [](MDB_txn* txn, const std::string& id, std::string& error) {
      return delete_checkpoints_txn(txn, id, error);
    });
  return std::unique_ptr<checkpoint_store>(
    new lmdb_checkpoint_store(lmdb->env(), *dbi, store));
}

namespace {

int delete_checkpoints_txn(MDB_txn* txn, const std::string& session,
                           std::string& error) {
  MDB_dbi dbi = 0;
  // Opening an open database returns its handle; a store that never had
  // checkpoints has nothing to delete (the database is made by the first
  // open_lmdb_checkpoint_store).
  int rc = mdb_dbi_open(txn, db_name, 0, &dbi);
  if (rc == MDB_NOTFOUND)
    return 0;
  if (rc != 0) {
    error = "open kernel_checkpoints";
    return rc;
  }
  return drop_all(txn, dbi, session, error);
}

} // namespace

} // namespace mibyan
