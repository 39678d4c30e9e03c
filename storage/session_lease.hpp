// File: storage/session_lease.hpp
//
// Leases with fencing tokens (docs/cluster.md, "Several gateways"): which
// process runs a session's conversation, or the one scheduler of a store.
// A lease is a named row {holder, token, expiry}; at most one holder has a
// live lease of a name at a time, and every change of hands draws a new
// token from one counter per store, so tokens only grow. A writer that
// lost its lease still holds its old token: the store refuses its writes
// (store_write::fence, checked inside the write's own transaction), so a
// partitioned or paused gateway can never write over its successor.
//
// Implementations: the LMDB one (session_lease_lmdb.cpp) keeps the rows in
// the session store's own environment (named database "leases"), so every
// process that opens one store directory shares them; the PostgreSQL one
// keeps them in a table of the store's database.
//
// Clock: the LMDB rows use the wall clock of the machine (all holders
// share it: one disk); tests inject one.
//
// Thread safety: every function may be called from any thread. Every
// acquire/renew/release/expire is one write transaction (blocking: an
// fsync) - call them from a blocking pool, never a CAF scheduler or I/O
// thread. Nothing throws.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "base/status.hpp"

namespace mibyan {

class session_store;

/// One lease row as stored.
struct lease_state {
  std::string name;
  /// The last holder ("" = never held).
  std::string holder;
  /// The token of the last grant (0 = never held).
  uint64_t token = 0;
  /// Epoch milliseconds; 0 after a release or a forced expiry.
  int64_t expires_at_ms = 0;
  /// The holder gave it up (release), rather than letting it lapse.
  bool released = false;

  /// Whether `holder` holds it at `now_ms`.
  bool live(int64_t now_ms) const {
    return !holder.empty() && !released && expires_at_ms > now_ms;
  }
};

/// The answer to acquire: granted (then `token`), or the live row of the
/// other holder (`current`).
struct lease_attempt {
  bool granted = false;
  /// granted: the token to write with; the same as the holder's previous
  /// grant when nobody held the lease in between (a renewal, or a
  /// re-acquire after its own release).
  uint64_t token = 0;
  int64_t expires_at_ms = 0;
  /// granted: the token changed (another holder had it since, or first
  /// grant): state cached under the old token is stale.
  bool new_token = false;
  /// granted: the previous holder's lease lapsed without a release (it
  /// died, or was partitioned past its expiry): work it persisted may be
  /// unfinished (docs/cluster.md, "Failover").
  bool took_over = false;
  /// The row before this attempt (for !granted: the live holder).
  lease_state current;
};

/// The lease name of a session's conversation ("session:" + id): the row
/// store_write::fence is checked against.
std::string session_lease_name(const std::string& session_id);

/// The status code of a write refused by its fencing token:
/// permission_denied, with a message starting with `fenced_prefix`.
constexpr const char* fenced_prefix = "fenced: ";

class session_lease_store {
public:
  virtual ~session_lease_store() = default;

  /// Acquires or renews lease `name` for `holder` until now + `ttl_ms`.
  /// Granted when the row is free, released, expired, or already
  /// `holder`'s; otherwise not granted and `current` names the live
  /// holder. Errors: empty name or holder, ttl_ms <= 0
  /// (invalid_argument); the store (unavailable when it cannot be
  /// reached, retryable).
  virtual result<lease_attempt> acquire(const std::string& name,
                                        const std::string& holder,
                                        int64_t ttl_ms) = 0;

  /// Gives lease `name` up if `holder` holds it with `token` (the token
  /// stays in the row, so the next grant to anyone else draws a new one).
  /// Releasing a lease one does not hold succeeds and changes nothing.
  virtual status release(const std::string& name, const std::string& holder,
                         uint64_t token) = 0;

  /// The row of `name` (not_found when it was never held).
  virtual result<lease_state> get(const std::string& name) const = 0;

  /// Ends every live lease of `holder` now (it was declared lost by the
  /// cluster), so others take them over at once; their tokens stay, so
  /// the holder's late writes are fenced by the next grant. Returns how
  /// many were ended.
  virtual result<size_t> expire_holder(const std::string& holder) = 0;

  /// ok when `token` is the current token of `name` (or the lease was
  /// never held); permission_denied (fenced_prefix) when a newer token
  /// exists. A read through get(), the same on every backend: advisory,
  /// the binding check is the one inside a write's transaction.
  status check(const std::string& name, uint64_t token) const;
};

/// The tokens this process holds, by session id, for the session writer
/// (actors/session_writer.hpp) to stamp into each write's `fence`. Filled
/// by the runtime's lease keeper; a token stays after release, so late
/// writes of a conversation whose lease moved on are refused.
/// Thread-safe.
class lease_tokens {
public:
  void set(const std::string& session, uint64_t token) {
    std::lock_guard<std::mutex> g{mtx_};
    tokens_[session] = token;
  }
  void erase(const std::string& session) {
    std::lock_guard<std::mutex> g{mtx_};
    tokens_.erase(session);
  }
  /// 0 = this process never held the session's lease (unfenced write).
  uint64_t of(const std::string& session) const {
    std::lock_guard<std::mutex> g{mtx_};
    auto it = tokens_.find(session);
    return it == tokens_.end() ? 0 : it->second;
  }

private:
  mutable std::mutex mtx_;
  std::map<std::string, uint64_t> tokens_;
};

/// The lease store of `store`'s backend, sharing its environment or
/// database. LMDB: opens (creating) the "leases" database
/// (storage/lmdb/lmdb_session_lease.hpp); call it during set-up, before
/// other threads open databases of the same environment. `now_ms` (null =
/// the wall clock) is the clock of expiries. Errors: a read-only store;
/// unavailable for a backend without leases.
result<std::shared_ptr<session_lease_store>>
open_session_leases(session_store& store,
                    std::function<int64_t()> now_ms = nullptr);

} // namespace mibyan
