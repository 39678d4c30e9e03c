// File: storage/lmdb/lmdb_session_store.hpp
//
// The session store's LMDB backend (storage/session_store.hpp has the
// contract): one LMDB environment, `$MIBYAN_HOME/sessions/` in production.
//
// Layout (named databases):
//   meta             name -> value ("schema_version" decimal text,
//                    "next_message_id" be64)
//   sessions         session id -> session_info as JSON
//   sessions_by_time be64(started_at_ms) session id -> ""
//   children         parent id \0 child id -> ""
//   msgs             session id \0 be64(message id) -> stored_message
//   msg_by_id        be64(message id) -> session id
//   msg_keys         session id \0 idempotency key -> be64(message id)
//   fts_blocks/fts_df the full-text index (storage/lmdb/fts_index.hpp)
//   approvals        session id -> approved pattern keys, '\n'-separated
//                    (docs/approvals.md; deleted with the session)
//   responses        response id -> stored_response (the Responses API,
//                    storage/response_record.hpp; deleted with the session)
//   responses_by_session session id \0 response id -> ""
//   cron_jobs        job id -> cron_job_record (storage/cron_record.hpp)
//   cron_runs        job id \0 be64(run sequence) -> cron_run_record
//   cron_run_ids     run id -> the run's cron_runs key
//   (the run sequence is meta "cron_next_run_seq", be64; docs/cron.md)
//
// Every mutation is one write transaction committed before the function
// returns (fsync'd; MDB_NOSYNC is never used). Writes are serialised by
// LMDB; reads run concurrently with them on snapshots.
//
// Other stores that keep per-session data in this environment (their own
// named databases, opened with env().open_dbi during set-up) register a
// delete hook, so delete_session removes their rows in its transaction.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "storage/lmdb/fts_index.hpp"
#include "storage/lmdb/lmdb_env.hpp"
#include "storage/session_store_base.hpp"

namespace mibyan {

class lmdb_session_store final : public session_store_base {
public:
  /// The schema this build writes. Version 2: the layout above. Version 1
  /// kept one index key per (term, message) in `fts_terms`; opening such a
  /// store read-write rebuilds the index (docs/storage.md), read-only it
  /// can be read but not searched.
  static constexpr int schema_version_current = 2;

  /// Opens the store in `opts.dir` (the backend field is not looked at),
  /// creating it unless read-only, and migrates an older schema
  /// (read-write only). Safe with other processes opening the same
  /// directory at the same time: a new store's databases and schema
  /// version are created in one transaction, and a migration runs under
  /// the schema lock (storage/lmdb/schema_lock.hpp; this call may wait for
  /// another process's migration). Errors: see lmdb_env::open; a schema
  /// newer than this build; status_code::not_found for a read-only open
  /// of a store that does not exist or is still being created.
  static store_result<std::unique_ptr<lmdb_session_store>>
  open(session_store_options opts);

  /// Called inside delete_session's write transaction for the session
  /// being deleted: deletes what another store keeps for it and returns 0,
  /// or an LMDB code / lmdb_env::user_error with `error` naming the step
  /// (the delete then aborts: nothing is deleted). It may run more than
  /// once for one delete (the transaction is retried after the map
  /// grows): no side effects outside `txn`.
  using delete_hook = std::function<int(MDB_txn* txn, const std::string& id,
                                        std::string& error)>;
  /// Adds a hook (thread-safe; hooks run in the order added).
  void add_delete_hook(delete_hook hook);

  const char* backend() const override;
  store_result<std::vector<session_info>>
  list_sessions_where(size_t limit, size_t offset,
                      const std::function<bool(const session_info&)>& keep,
                      bool* more) const override;
  store_result<std::vector<session_info>>
  list_sessions_since(int64_t since_ms, size_t limit) const override;
  store_result<cron_job_list>
  list_cron_jobs(bool schedulable_only = false) const override;
  int schema_version() const override;
  store_result<uint64_t> message_count() const override;
  store_stats stats() const override;

  /// Bytes the data file occupies on disk.
  uint64_t disk_bytes() const { return env_->disk_bytes(); }
  /// Bytes the data take now (lmdb_env::used_bytes).
  uint64_t used_bytes() const { return env_->used_bytes(); }
  /// The environment, for stores that add their own named databases, for
  /// diagnostics and for tests.
  lmdb_env& env() { return *env_; }

private:
  // Sessions read in the current write transaction, written back once at
  // its end, and the message id counter (lmdb_store_messages.cpp).
  struct txn_cache {
    std::map<std::string, session_info> touched;
    /// Appended messages, indexed together by flush_cache.
    std::vector<fts_index::document> to_index;
    uint64_t next_id = 1;
    uint64_t first_id = 1;
    int session(MDB_txn* txn, MDB_dbi dbi, const std::string& id,
                session_info*& out, std::string& error);
  };

  lmdb_session_store() = default;

  // -- the primitives of session_store_base (input already checked) --------
  store_status do_create_session(session_info& s, bool generated) override;
  store_result<session_info>
  do_get_session(const std::string& id) const override;
  store_result<std::vector<std::string>>
  do_list_children(const std::string& id) const override;
  store_status
  update_session(const std::string& id, const char* what,
                 const std::function<void(session_info&)>& fn) override;
  /// Deletes as the interface says. Works on a full disk: the store's
  /// reserve file is released first and re-created afterwards when there
  /// is room (storage/lmdb/space_reserve.hpp), and a second, empty commit
  /// makes the pages the delete freed reusable by the next write (LMDB
  /// reuses a transaction's freed pages only after another commit).
  store_status do_delete_session(const std::string& id) override;
  store_result<std::vector<std::string>>
  do_get_approvals(const std::string& id) const override;
  store_status do_set_approvals(const std::string& id,
                                const std::vector<std::string>& keys) override;
  store_status do_put_response(const stored_response& r) override;
  store_result<stored_response>
  do_get_response(const std::string& id) const override;
  store_status do_delete_response(const std::string& id) override;
  store_result<uint64_t>
  do_last_message_id(const std::string& session_id) const override;
  store_status do_put_cron_job(const cron_job_record& j) override;
  store_result<cron_job_record>
  do_get_cron_job(const std::string& id) const override;
  store_status do_delete_cron_job(const std::string& id) override;
  store_result<cron_job_record>
  do_update_cron_job(const std::string& id,
                     const std::function<status(cron_job_record&)>& fn) override;
  store_status do_put_cron_run(const cron_run_record& r, size_t keep) override;
  store_result<cron_run_record>
  do_get_cron_run(const std::string& id) const override;
  store_result<std::vector<cron_run_record>>
  do_list_cron_runs(const std::string& job_id, size_t limit, size_t offset,
                    bool* more) const override;
  store_status do_apply_cron_changes(const cron_changes& c,
                                     size_t keep) override;
  store_result<std::vector<append_outcome>>
  do_append_batch(const std::vector<pending_append>& batch,
                  int64_t stamp) override;
  store_status do_commit_group(std::vector<store_write>& writes,
                               const std::vector<char>& valid,
                               const std::vector<session_info>& prepared,
                               int64_t stamp) override;
  store_result<std::vector<stored_message>>
  do_load_messages(const std::string& session_id) const override;
  store_result<search_results>
  do_search(const search_request& req, const fts_query& q) const override;
  store_status do_verify(bool deep,
                         std::vector<std::string>& problems) const override;

  int create_txn(MDB_txn* txn, session_info& s, bool generated,
                 std::string& error);
  int begin_cache(MDB_txn* txn, txn_cache& c, std::string& error);
  int flush_cache(MDB_txn* txn, txn_cache& c, std::string& error);
  int append_txn(MDB_txn* txn, txn_cache& c, const pending_append& p,
                 int64_t stamp, append_outcome& out, std::string& error);
  store_status open_databases();
  store_status read_version(int& found) const;
  store_status migrate();
  store_status reindex_fts();
  store_status delete_session_txn(const std::string& id);
  // Runs the delete hooks for session `id` inside `txn`.
  int run_delete_hooks(MDB_txn* txn, const std::string& id, std::string& error);
  // Deletes the responses of session `id` inside `txn`
  // (lmdb_store_responses.cpp).
  int delete_responses_of(MDB_txn* txn, const std::string& id,
                          std::string& error);
  // Adds the inconsistencies of the response databases to `problems`
  // (verify's part; lmdb_store_responses.cpp).
  int verify_responses(MDB_txn* txn, std::vector<std::string>& problems,
                       std::string& error) const;
  store_status settle_free_pages();

  session_store_options opts_;
  std::unique_ptr<lmdb_env> env_;
  fts_index fts_;
  int schema_version_ = 0;
  MDB_dbi meta_ = 0;
  MDB_dbi sessions_ = 0;
  MDB_dbi by_time_ = 0;
  MDB_dbi children_ = 0;
  MDB_dbi msgs_ = 0;
  MDB_dbi msg_by_id_ = 0;
  MDB_dbi msg_keys_ = 0;
  /// 0 when a read-only store predates the approvals database.
  MDB_dbi approvals_ = 0;
  bool has_approvals_ = false;
  /// 0 (and has_responses_ false) when a read-only store predates them.
  MDB_dbi responses_ = 0;
  MDB_dbi responses_by_session_ = 0;
  bool has_responses_ = false;
  /// The cron databases; 0 (and has_cron_ false) when a read-only store
  /// predates them.
  MDB_dbi cron_jobs_ = 0;
  MDB_dbi cron_runs_ = 0;
  MDB_dbi cron_run_ids_ = 0;
  bool has_cron_ = false;
  // Parts of the cron operations inside a write transaction
  // (lmdb_store_cron.cpp).
  int put_cron_run_txn(MDB_txn* txn, const cron_run_record& r, size_t keep,
                       bool require_job, std::string& error);
  int delete_cron_job_txn(MDB_txn* txn, const std::string& id,
                          std::string& error);
  mutable std::mutex hooks_mutex_;
  std::vector<delete_hook> delete_hooks_;
};

} // namespace mibyan
