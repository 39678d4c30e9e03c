// File: storage/lmdb/lmdb_prompt_store.hpp
//
// The LMDB implementation of prompt_store (storage/prompt_store.hpp) on an
// lmdb_session_store's environment. Named databases:
//   prompts          hash -> version byte (1) + the prompt's bytes
//   session_prompts  session id -> hash
//   prompt_refs      hash \0 session id -> ""
// They are created by the first read-write open; a read-only store written
// before them has no prompts (reads answer not_found).
//
// Opening registers a delete hook on the session store
// (lmdb_session_store::add_delete_hook): delete_session drops the
// session's reference, and the prompt when it was the last, inside its own
// transaction. A delete through a store on which no prompt store was
// opened leaves the reference; `collect` removes it.
//
// Thread safety: see prompt_store. Open it while setting up (it opens its
// databases), before the environment is shared with other threads.
#pragma once

#include <memory>

#include "storage/prompt_store.hpp"

namespace mibyan {

class lmdb_session_store;

/// Opens (read-write: creates) the databases in `store`'s environment;
/// `store` must outlive the result. Errors: LMDB refuses to open them.
store_result<std::unique_ptr<prompt_store>>
open_lmdb_prompt_store(lmdb_session_store& store);

} // namespace mibyan
