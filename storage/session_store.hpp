// File: storage/session_store.hpp
//
// The durable store of sessions and their messages, with full-text search,
// in one LMDB environment (`$MIBYAN_HOME/sessions/` in production).
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
//   fts_blocks/fts_df the full-text index (storage/fts_index.hpp)
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
// returns (fsync'd; MDB_NOSYNC is never used): an appended message, the
// session's counters and the message's index postings become durable
// together or not at all.
//
// Thread safety: all functions may be called from any thread. Writes are
// serialised by LMDB (production has a single writer actor in front);
// reads run concurrently with them on snapshots. No transaction outlives a
// call. Nothing throws; errors come back as values whose message names the
// operation and the cause.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "messages/chat.hpp"
#include "storage/cron_record.hpp"
#include "storage/fts_index.hpp"
#include "storage/lmdb_env.hpp"
#include "storage/response_record.hpp"
#include "storage/session_record.hpp"
#include "storage/store_result.hpp"

namespace mibyan {

struct session_store_options {
  /// Directory of the LMDB environment (created 0700); production uses
  /// `session_store::default_dir(home)`.
  std::string dir;
  /// Open read-only: no writes, no schema migration.
  bool read_only = false;
  /// Initial map size (sparse); grows automatically when full.
  uint64_t map_size = uint64_t{8} << 30;
  /// Largest accepted message (content, reasoning and tool calls together).
  size_t max_message_bytes = size_t{16} << 20;
  /// Clock in milliseconds since the epoch (tests inject a fixed one).
  std::function<int64_t()> now_ms;
  /// Called once per migration step (from, to) while opening read-write,
  /// inside the transaction that performs the step.
  std::function<void(int from, int to)> on_migrate;
};

/// What creating a session needs. Empty `id` generates one.
struct new_session {
  std::string id;
  std::string source = "cli";
  std::string model;
  std::string provider;
  std::string cwd;
  std::string title;
  std::string parent_session_id;
  /// A JSON object as text, at most 16 KiB ("" = none).
  std::string metadata_json;
  /// 0 = now.
  int64_t started_at_ms = 0;
};

/// One message to append. A non-empty `key` makes the append idempotent
/// within the session; keys starting with '_' mark synthetic scaffolding
/// and are never persisted.
struct pending_append {
  std::string session_id;
  chat_message message;
  std::string key;
};

struct append_outcome {
  /// The message id (the existing one for a duplicate; 0 when skipped).
  uint64_t id = 0;
  /// The key was already persisted; nothing was written.
  bool duplicate = false;
  /// The key starts with '_': nothing was written.
  bool skipped = false;
};

/// One write of a group commit (session_store::commit_group): the fields
/// of its kind are read, the outcome fields are filled in.
struct store_write {
  enum class kind : uint8_t { create, append, usage, end };
  kind what = kind::append;
  /// kind::create
  new_session create;
  /// kind::append
  pending_append append;
  /// kind::usage and kind::end
  std::string session_id;
  token_usage usage;
  int64_t api_calls = 1;
  std::string reason;
  /// The writer's lease token of the session (kind::append, usage, end;
  /// 0 = unfenced): the write is refused, permission_denied with a message
  /// starting "fenced: ", when the session's lease (storage/session_lease.hpp)
  /// has a newer token, checked inside the write's transaction.
  uint64_t fence = 0;
  // -- outcome --
  /// This write's own result (ok once the group committed).
  store_status status;
  /// kind::create: the new session.
  session_info created;
  /// kind::append
  append_outcome appended;
};

struct search_request {
  /// Words (AND), "quoted phrases"; see storage/fts_query.hpp.
  std::string query;
  /// Accepted roles (system, user, assistant, tool); empty = all.
  std::vector<std::string> roles;
  /// Only messages of this session ("" = all sessions).
  std::string session_id;
  /// 1..1000.
  size_t limit = 20;
  size_t offset = 0;
};

struct search_hit {
  uint64_t message_id = 0;
  std::string session_id;
  std::string role;
  double score = 0;
  std::string snippet;
  /// The same excerpt without markers, and the byte ranges [begin, end)
  /// of the matching words in it.
  std::string text;
  std::vector<std::pair<size_t, size_t>> highlights;
};

struct search_results {
  std::vector<search_hit> hits;
  /// All matches before limit/offset.
  size_t total = 0;
};

class session_store {
public:
  /// The schema this build writes. Version 2: the layout above. Version 1
  /// kept one index key per (term, message) in `fts_terms`; opening such a
  /// store read-write rebuilds the index (docs/storage.md), read-only it
  /// can be read but not searched.
  static constexpr int schema_version_current = 2;
  /// Longest accepted session id, title, idempotency key (bytes).
  static constexpr size_t max_id_bytes = 128;
  static constexpr size_t max_title_bytes = 1024;
  static constexpr size_t max_key_bytes = 256;

  /// Returns `home + "/sessions"`.
  static std::string default_dir(const std::string& home);

  /// Opens the store, creating it unless read-only, and migrates an older
  /// schema (read-write only). Safe with other processes opening the same
  /// directory at the same time: a new store's databases and schema
  /// version are created in one transaction, and a migration runs under
  /// the schema lock (storage/schema_lock.hpp; this call may wait for
  /// another process's migration). Errors: see lmdb_env::open; a schema
  /// newer than this build; status_code::not_found for a read-only open
  /// of a store that does not exist or is still being created.
  static store_result<std::unique_ptr<session_store>>
  open(session_store_options opts);

  // -- sessions ---------------------------------------------------------------

  /// Creates a session. Errors: id malformed or taken, parent missing,
  /// fields not UTF-8 or too long.
  store_result<session_info> create_session(const new_session& s);

  /// Errors: unknown id.
  store_result<session_info> get_session(const std::string& id) const;

  /// Sessions, newest (started_at) first.
  store_result<std::vector<session_info>> list_sessions(size_t limit,
                                                        size_t offset) const;

  /// Sessions, newest first, that `keep` accepts: skips the first `offset`
  /// accepted ones and returns up to `limit`; `*more` (may be null) says
  /// whether another accepted session follows. An empty `keep` accepts
  /// all and skips the offset without reading; otherwise it reads (and
  /// decodes) every session it passes, so a deep offset costs a scan.
  store_result<std::vector<session_info>>
  list_sessions_where(size_t limit, size_t offset,
                      const std::function<bool(const session_info&)>& keep,
                      bool* more) const;

  /// Every session started at or after `since_ms` (epoch milliseconds),
  /// newest first, at most `limit`; stops reading at the first older one.
  store_result<std::vector<session_info>>
  list_sessions_since(int64_t since_ms, size_t limit) const;

  /// The ids of the sessions whose parent is `id` (compression
  /// continuations, subagents), in id order. Errors: id malformed.
  store_result<std::vector<std::string>>
  list_children(const std::string& id) const;

  store_status set_title(const std::string& id, const std::string& title);

  /// Ends the session (ended_at = `ended_at_ms`, 0 = now). Ending an ended
  /// session keeps the first end and succeeds.
  store_status end_session(const std::string& id, const std::string& reason,
                           int64_t ended_at_ms = 0);

  /// Adds token counts and `api_calls` model calls to the counters.
  store_status add_usage(const std::string& id, const token_usage& usage,
                         int64_t api_calls = 1);

  /// Deletes the session, its messages, keys and index postings in one
  /// transaction. Children keep their parent_session_id. Works on a full
  /// disk: the store's reserve file is released first and re-created
  /// afterwards when there is room (storage/space_reserve.hpp), and a
  /// second, empty commit makes the pages the delete freed reusable by
  /// the next write (LMDB reuses a transaction's freed pages only after
  /// another commit).
  store_status delete_session(const std::string& id);

  // -- approvals --------------------------------------------------------------

  /// The pattern keys approved for the whole of session `id` (empty when
  /// none; the session need not exist). Errors: id malformed, read failure.
  store_result<std::vector<std::string>>
  get_approvals(const std::string& id) const;
  /// Replaces them (at most 256 keys of at most 200 bytes, no newlines).
  store_status set_approvals(const std::string& id,
                             const std::vector<std::string>& keys);

  // -- responses (docs/serve.md, "Responses API") ----------------------------

  /// Stores `r` in one transaction (replacing a row with its id), indexed
  /// under its session so that delete_session removes it. Errors: ids
  /// malformed (invalid_argument), unknown session (not_found), a
  /// read-only store.
  store_status put_response(const stored_response& r);
  /// Errors: id malformed (invalid_argument), unknown id (not_found), a
  /// damaged row or one of a newer version (data_corrupt).
  store_result<stored_response> get_response(const std::string& id) const;
  /// Errors: id malformed (invalid_argument), unknown id (not_found).
  store_status delete_response(const std::string& id);
  /// The id of the session's last message, 0 when it has none. Errors:
  /// unknown session (not_found).
  store_result<uint64_t> last_message_id(const std::string& session_id) const;

  // -- scheduled jobs (docs/cron.md, "Storage"; session_store_cron.cpp) ------
  //
  // Records are opaque here: the caller (cron/) validates them. Every
  // write is one transaction. Errors: a malformed id (invalid_argument),
  // an unknown job or run (not_found), a record that does not decode
  // (data_corrupt, naming it), a read-only store written before the cron
  // databases (unavailable for writes; reads find nothing).

  /// Inserts or replaces job `j` (the whole record).
  store_status put_cron_job(const cron_job_record& j);
  store_result<cron_job_record> get_cron_job(const std::string& id) const;
  /// Every job in id order (only enabled, unpaused ones with
  /// `schedulable_only`: what the scheduler loads at start-up). Records
  /// that do not decode are listed in `damaged`, not returned.
  store_result<cron_job_list> list_cron_jobs(bool schedulable_only = false)
    const;
  /// Deletes the job and its run history in one transaction. A damaged
  /// record can be deleted.
  store_status delete_cron_job(const std::string& id);
  /// Read-modify-write of job `id` in one transaction: `fn` gets the
  /// stored record and changes it (returning an error aborts, nothing is
  /// written; its code is kept). `fn` may run more than once (the map
  /// grows and the transaction is retried): no side effects outside `j`.
  /// Returns the record as written.
  store_result<cron_job_record>
  update_cron_job(const std::string& id,
                  const std::function<status(cron_job_record& j)>& fn);
  /// Inserts run `r` (a new id: newest of its job) or replaces the stored
  /// run with the same id in place. The job must exist. After an insert,
  /// the job keeps its `keep` newest runs (older ones are deleted; 0 =
  /// keep all).
  store_status put_cron_run(const cron_run_record& r, size_t keep);
  store_result<cron_run_record> get_cron_run(const std::string& id) const;
  /// The job's runs, newest first: skips `offset`, returns up to `limit`;
  /// `*more` (may be null) says whether older ones follow. Errors: job id
  /// malformed; a damaged run is an error naming it. An unknown job has no
  /// runs (empty list).
  store_result<std::vector<cron_run_record>>
  list_cron_runs(const std::string& job_id, size_t limit, size_t offset,
                 bool* more = nullptr) const;
  /// Applies a batch of engine changes in ONE transaction (jobs put, runs
  /// put with `keep` as in put_cron_run, jobs deleted): all or nothing. A
  /// run of a job that is neither stored nor put in the batch is dropped
  /// (its job was deleted while it ran), not an error.
  store_status apply_cron_changes(const cron_changes& c, size_t keep);

  // -- messages ---------------------------------------------------------------

  /// Appends one message in one committed transaction, updating the
  /// session counters (message_count, tool_call_count) and the full-text
  /// index. Errors: unknown session, role not system/user/assistant/tool,
  /// a tool message without tool_call_id, a tool call without id or name,
  /// text that is not UTF-8, a message over max_message_bytes.
  store_result<append_outcome> append_message(const std::string& session_id,
                                              const chat_message& m,
                                              const std::string& key = {});

  /// Appends several messages (any sessions) in ONE transaction: all or
  /// nothing. Outcomes are in input order.
  store_result<std::vector<append_outcome>>
  append_batch(const std::vector<pending_append>& batch);

  /// Group commit: applies `writes` in order in ONE write transaction (one
  /// fsync). Each write is checked on its own: one that is rejected (bad
  /// input, unknown session, taken id...) changes nothing and gets its
  /// error in `status`, and the others still commit. When the transaction
  /// itself fails (disk full, I/O error) nothing is stored and every write
  /// gets that failure. Returns the transaction's status. Every write with
  /// an ok `status` is durable when this returns.
  store_status commit_group(std::vector<store_write>& writes);

  /// The session's messages in order. Errors: unknown session.
  store_result<std::vector<stored_message>>
  load_messages(const std::string& session_id) const;

  // -- search -----------------------------------------------------------------

  /// Ranked full-text search (BM25). Errors: a query without words, an
  /// unknown role or session, limit outside 1..1000.
  store_result<search_results> search(const search_request& req) const;

  // -- maintenance ------------------------------------------------------------

  /// Checks that counters match messages, every index posting references
  /// an existing message, frequencies and statistics add up, every stored
  /// response belongs to an existing session and is indexed under it, and
  /// (with `deep`) that every message's words are indexed. Returns the problems
  /// found (at most 20 listed) as an error.
  store_status verify(bool deep = false) const;

  /// The schema version found on disk (after migration when read-write).
  int schema_version() const { return schema_version_; }
  /// Total messages stored.
  store_result<uint64_t> message_count() const;
  /// Bytes the data file occupies on disk.
  uint64_t disk_bytes() const { return env_->disk_bytes(); }
  uint64_t used_bytes() const { return env_->used_bytes(); }
  lmdb_env& env() { return *env_; }

private:
  // Sessions read in the current write transaction, written back once at
  // its end, and the message id counter (session_store_messages.cpp).
  struct txn_cache {
    std::map<std::string, session_info> touched;
    /// Appended messages, indexed together by flush_cache.
    std::vector<fts_index::document> to_index;
    uint64_t next_id = 1;
    uint64_t first_id = 1;
    int session(MDB_txn* txn, MDB_dbi dbi, const std::string& id,
                session_info*& out, std::string& error);
  };

  session_store() = default;
  store_result<session_info> prepare_session(const new_session& ns) const;
  int create_txn(MDB_txn* txn, session_info& s, bool generated,
                 std::string& error);
  std::string check_append(const pending_append& p) const;
  int begin_cache(MDB_txn* txn, txn_cache& c, std::string& error);
  int flush_cache(MDB_txn* txn, txn_cache& c, std::string& error);
  int append_txn(MDB_txn* txn, txn_cache& c, const pending_append& p,
                 int64_t stamp, append_outcome& out, std::string& error);
  store_status open_databases();
  store_status read_version(int& found) const;
  store_status migrate();
  store_status reindex_fts();
  store_status delete_session_txn(const std::string& id);
  // Deletes the responses of session `id` inside `txn`
  // (session_store_responses.cpp).
  int delete_responses_of(MDB_txn* txn, const std::string& id,
                          std::string& error);
  // Adds the inconsistencies of the response databases to `problems`
  // (verify's part; session_store_responses.cpp).
  int verify_responses(MDB_txn* txn, std::vector<std::string>& problems,
                       std::string& error) const;
  store_status settle_free_pages();
  int64_t now() const;
  store_status update_session(const std::string& id, const char* what,
                              const std::function<std::string(session_info&)>&
                                fn);

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
  // (session_store_cron.cpp).
  int put_cron_run_txn(MDB_txn* txn, const cron_run_record& r, size_t keep,
                       bool require_job, std::string& error);
  int delete_cron_job_txn(MDB_txn* txn, const std::string& id,
                          std::string& error);
};

} // namespace mibyan
