// File: storage/postgres/pg_session_store.hpp
//
// The session store on PostgreSQL (storage.backend: postgres;
// docs/storage.md, "PostgreSQL"): the same operations and guarantees as the
// LMDB store (storage/session_store.hpp), for several gateways sharing one
// database.
//
// Guarantees:
//   * every mutation is one transaction (BEGIN ... COMMIT) committed before
//     the call returns: a message, its session's counters and its search
//     words become visible together or not at all; a lost connection never
//     leaves half a write;
//   * the sessions a write touches are locked (SELECT ... FOR UPDATE, in id
//     order, so two batches never deadlock) before anything is written, so
//     appends to one session are serialised across gateways: message ids
//     (from a sequence) increase within a session in commit order, the
//     counters are exact, and an idempotency key is stored once per
//     session (a duplicate returns the first id);
//   * a serialization failure or deadlock reported by the server reruns
//     the transaction (up to 5 times); a connection found dead before a
//     write started is replaced and the call goes on; a connection lost
//     during a write is `unavailable` (retryable). When the answer to a
//     COMMIT is lost the outcome is unknown: retry with the same
//     idempotency key.
//
// Errors: the LMDB store's codes for the same situations (validation is
// shared, storage/store_checks.hpp), plus `unavailable` ("store
// unavailable: ...") while the database cannot be reached.
//
// Thread safety: all functions may be called from any thread; each call
// takes a connection from the pool (storage/postgres/pg_pool.hpp) and may
// block on the network: never call it on a CAF scheduler thread or a
// serve I/O thread. Nothing throws.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "storage/session_store_base.hpp"

namespace mibyan {

namespace pg {
class pool;
class connection;
} // namespace pg

struct pg_store_options {
  /// libpq URL (storage.postgres.url), passed to libpq unchanged (TLS:
  /// sslmode=...). Should carry no password.
  std::string url;
  /// The password (read from the environment by the caller:
  /// storage.postgres.password_env); "" = libpq's PGPASSWORD / ~/.pgpass.
  std::string password;
  /// Connections at most (storage.postgres.pool_size).
  size_t pool_size = 4;
  /// Migrate an older schema when opening (storage.auto_migrate); without
  /// it an older schema is refused with a hint to `mibyan store migrate`.
  bool auto_migrate = true;
  /// Refuse writes (reads work; no migration).
  bool read_only = false;
  int connect_timeout_s = 5;
  /// As session_store_options.
  size_t max_message_bytes = size_t{16} << 20;
  std::function<int64_t()> now_ms;
  std::function<void(int from, int to)> on_migrate;
};

class pg_session_store final : public session_store_base {
public:
  /// Connects (one connection, to check the URL and the schema), migrates
  /// when allowed, and returns the store. Errors: a malformed URL
  /// (config_invalid), an unreachable server (unavailable), a refused login
  /// (permission_denied), a missing database (not_found), a schema newer
  /// than this build (data_corrupt) or older without auto_migrate
  /// (config_invalid); each message is one line naming the problem.
  static store_result<std::unique_ptr<pg_session_store>>
  open(pg_store_options opts);
  /// The same from the backend-neutral options (storage.backend:
  /// postgres): postgres_url, postgres_password, postgres_pool_size,
  /// auto_migrate, read_only, max_message_bytes, now_ms, on_migrate.
  static store_result<std::unique_ptr<pg_session_store>>
  open(const session_store_options& opts);
  static pg_store_options options_from(const session_store_options& opts);

  /// `mibyan store migrate`: brings the schema to the current version.
  /// Returns {found, current}.
  static store_result<std::pair<int, int>> migrate(const pg_store_options& o);

  ~pg_session_store() override;

  // -- the operations of session_store (same contracts) -----------------------
  store_result<std::vector<session_info>>
  list_sessions_where(size_t limit, size_t offset,
                      const std::function<bool(const session_info&)>& keep,
                      bool* more) const override;
  store_result<std::vector<session_info>>
  list_sessions_since(int64_t since_ms, size_t limit) const override;
  store_result<cron_job_list>
  list_cron_jobs(bool schedulable_only = false) const override;

  int schema_version() const override { return schema_version_; }
  store_result<uint64_t> message_count() const override;
  /// Zeros: the server's files are not ours to measure (and the metrics
  /// must not wait for a round trip). database_bytes() asks the server.
  store_stats stats() const override { return {}; }
  /// pg_database_size of the database (0 when it cannot be read).
  uint64_t database_bytes() const;
  const char* backend() const override { return "postgres"; }

  /// The pool, for the small stores that share it (leases, checkpoints).
  pg::pool& connections() const { return *pool_; }

  using txn_fn = std::function<status(pg::connection&)>;
  /// Runs `fn` in one transaction with the retries described above.
  /// `fn` may run more than once: no side effects outside its outputs.
  store_status write_txn(const char* what, const txn_fn& fn) const;
  /// Runs `fn` on a connection (in a REPEATABLE READ, READ ONLY
  /// transaction when `snapshot`); a read on a dead pooled connection is
  /// retried on a new one.
  store_status read(const char* what, const txn_fn& fn,
                    bool snapshot = false) const;

private:
  pg_session_store() = default;

  // -- the primitives of session_store_base (input already checked) --------
  store_status do_create_session(session_info& s, bool generated) override;
  store_result<session_info>
  do_get_session(const std::string& id) const override;
  store_result<std::vector<std::string>>
  do_list_children(const std::string& id) const override;
  store_status
  update_session(const std::string& id, const char* what,
                 const std::function<void(session_info&)>& fn) override;
  store_status do_delete_session(const std::string& id) override;
  store_result<std::vector<std::string>>
  do_get_approvals(const std::string& id) const override;
  /// Also refuses keys that PostgreSQL text cannot hold (NUL bytes).
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
  /// Full-text search over tsvector + GIN: the same words match as in the
  /// LMDB index (Mibyan's tokenizer builds the tsvector), ranking is
  /// ts_rank_cd (docs/storage.md says where it differs from BM25).
  store_result<search_results>
  do_search(const search_request& req, const fts_query& q) const override;
  /// Counters against messages, idempotency keys against messages,
  /// responses against sessions, every message's words indexed (`deep`).
  store_status do_verify(bool deep,
                         std::vector<std::string>& problems) const override;

  status create_in(pg::connection& c, session_info& s, bool generated,
                   const char* what) const;
  status read_only_refusal(const char* what) const;

  pg_store_options opts_;
  std::unique_ptr<pg::pool> pool_;
  int schema_version_ = 0;
};

} // namespace mibyan
