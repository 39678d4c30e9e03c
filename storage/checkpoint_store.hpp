// File: storage/checkpoint_store.hpp
//
// Where kernel checkpoints live (docs/execute_code.md, "Checkpoints"): the
// latest checkpoint of each session's kernel namespace, as opaque bytes
// (the HMAC envelope of actors/kernel_checkpoints.hpp), keyed by session
// and a checkpoint number that only grows.
//
// The interface is small on purpose; backends: LMDB (below, on the session
// store's environment, a named database "kernel_checkpoints"), PostgreSQL
// (helper pg, storage/postgres/). Deleting a session deletes its
// checkpoints: the LMDB implementation registers a delete hook with the
// session store (storage/lmdb/lmdb_checkpoint_store.cpp), which runs it in
// its delete transaction.
//
// Thread safety: every method may be called from any thread; they block
// (disk I/O): call them off the CAF scheduler.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "storage/store_result.hpp"

namespace mibyan {

class session_store;

struct stored_checkpoint {
  std::string session;
  uint64_t seq = 0;
  std::string bytes;
};

class checkpoint_store {
public:
  virtual ~checkpoint_store() = default;

  /// Stores checkpoint `seq` of `session`. The previous checkpoint stays
  /// until this one is durable (both change in one transaction), then it
  /// is dropped. A `seq` not above the stored one is ignored (success):
  /// writers that finish out of order never replace a newer checkpoint.
  /// Errors: invalid session id, resource_exhausted (disk or map full),
  /// I/O.
  virtual store_status put(const std::string& session, uint64_t seq,
                           std::string_view bytes) = 0;

  /// The latest checkpoint of `session`, or nothing. Errors: I/O,
  /// data_corrupt (chunks missing).
  virtual store_result<std::optional<stored_checkpoint>>
  latest(const std::string& session) = 0;

  /// Drops every checkpoint of `session` (none is fine).
  virtual store_status remove(const std::string& session) = 0;
};

/// The checkpoint store on the session store's backend: for LMDB a named
/// database in the session store's environment, whose rows the session
/// store's delete removes in its transaction (a delete hook). `store` is
/// kept alive as long as the checkpoint store. Other backends: unavailable
/// until they implement it (PostgreSQL: helper pg). Call during set-up,
/// before the session store is shared with other threads.
store_result<std::unique_ptr<checkpoint_store>>
open_checkpoint_store(const std::shared_ptr<session_store>& store);

/// Bytes per stored chunk: a large checkpoint is split so no single LMDB
/// value is larger.
constexpr size_t checkpoint_chunk_bytes = size_t{4} << 20;

} // namespace mibyan
