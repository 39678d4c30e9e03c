// File: storage/lmdb/lmdb_checkpoint_store.hpp
//
// The LMDB checkpoint store (storage/checkpoint_store.hpp) on an
// environment given directly, without a session store: for reading the
// checkpoints of a store another process writes (tests, tools). The
// runtime uses open_checkpoint_store, which also wires the session
// store's delete.
#pragma once

#include <memory>

#include "storage/checkpoint_store.hpp"

namespace mibyan {

class lmdb_env;

/// Opens database "kernel_checkpoints" in `env` (read-only environments:
/// it must exist). `owner` is kept alive as long as the checkpoint store.
/// Call during set-up, before `env` is shared with other threads.
store_result<std::unique_ptr<checkpoint_store>>
open_lmdb_checkpoint_store(lmdb_env& env, std::shared_ptr<void> owner = {});

} // namespace mibyan
