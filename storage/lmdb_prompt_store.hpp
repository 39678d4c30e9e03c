// File: storage/lmdb_prompt_store.hpp
//
// The LMDB implementation of prompt_store (storage/prompt_store.hpp) on the
// session store's environment. Named databases:
//   prompts          hash -> version byte (1) + the prompt's bytes
//   session_prompts  session id -> hash
//   prompt_refs      hash \0 session id -> ""
// They are created by the first read-write construction; a read-only store
// written before them has no prompts (reads answer not_found).
//
// Thread safety: see prompt_store. Construct it while setting up (it opens
// its databases), before the environment is shared with other threads.
#pragma once

#include <memory>
#include <string>

#include <lmdb.h>

#include "storage/prompt_store.hpp"

namespace mibyan {

class lmdb_env;

class lmdb_prompt_store final : public prompt_store {
public:
  /// Opens (read-write: creates) the databases in `env`, which must
  /// outlive the store. Errors: LMDB refuses to open them.
  static store_result<std::unique_ptr<lmdb_prompt_store>> open(lmdb_env& env);

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

private:
  explicit lmdb_prompt_store(lmdb_env& env) : env_(env) {}
  lmdb_env& env_;
  bool present_ = false; // false: a read-only store without the databases
  MDB_dbi prompts_ = 0;
  MDB_dbi session_prompts_ = 0;
  MDB_dbi refs_ = 0;
};

/// The session store's delete hook: drops the prompt reference of
/// `session_id` inside the caller's write transaction `txn` (and the
/// prompt when it was the last reference). Returns 0, or an LMDB code with
/// `error` naming the step. Nothing to do (0) when the store has no prompt
/// databases.
int drop_prompt_reference_txn(MDB_txn* txn, const std::string& session_id,
                              std::string& error);

} // namespace mibyan
