// File: storage/session_store.hpp
//
// The durable store of sessions and their messages, with full-text search,
// approvals grants, Responses API records and scheduled jobs: an interface
// with one implementation per backend (docs/storage.md):
//   lmdb      the embedded default, one LMDB environment in
//             `$MIBYAN_HOME/sessions/` (storage/lmdb/lmdb_session_store.hpp);
//   postgres  a PostgreSQL database shared by several gateways, when this
//             build registers it (storage/store_backend.hpp).
// `open_session_store` picks the backend named by the options.
//
// The contract every backend keeps (the store test suites run each case
// against every backend of the build, tests/support/store_backends.hpp):
//   - Every mutation is one transaction committed before the function
//     returns: an appended message, the session's counters and the
//     message's index postings become durable together or not at all.
//   - All functions may be called from any thread, concurrently; writes
//     are serialised by the backend (production has a single writer actor
//     in front). No transaction outlives a call.
//   - Nothing throws; errors come back as values (storage/store_result.hpp)
//     whose message names the operation and the cause, with the same codes
//     on every backend: invalid_argument for malformed input, not_found for
//     an unknown session/job/run/response, already_exists for a taken id,
//     resource_exhausted for a full disk, data_corrupt for a damaged
//     record, unavailable when the backend cannot be reached (retryable).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "messages/chat.hpp"
#include "storage/cron_record.hpp"
#include "storage/response_record.hpp"
#include "storage/session_record.hpp"
#include "storage/store_result.hpp"

namespace mibyan {

/// How to open a store. Config keys `storage.*` (docs/configuration.md)
/// fill the backend fields; the rest are set by the caller.
struct session_store_options {
  /// The backend: "lmdb" (default) or "postgres". Any other name, or one
  /// this build has no implementation for, fails the open with
  /// status_code::config_invalid naming it.
  std::string backend = "lmdb";

  // -- lmdb ------------------------------------------------------------------
  /// Directory of the LMDB environment (created 0700); production uses
  /// `session_store::default_dir(home)`.
  std::string dir;
  /// Initial map size (sparse); grows automatically when full.
  uint64_t map_size = uint64_t{8} << 30;

  // -- postgres --------------------------------------------------------------
  /// libpq connection URI (postgresql://user@host:port/db?sslmode=...),
  /// with `${VAR}` references already expanded by the config loader.
  std::string postgres_url;
  /// The password when the URL has none (from MIBYAN_PG_PASSWORD or the
  /// home's .env; never from a flag, never logged).
  std::string postgres_password;
  /// Connections in the pool (1..256).
  size_t postgres_pool_size = 4;
  /// Create or migrate the schema when opening read-write. The LMDB
  /// backend always migrates its own embedded store on a read-write open.
  bool auto_migrate = false;

  // -- every backend ---------------------------------------------------------
  /// Open read-only: no writes, no schema migration.
  bool read_only = false;
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

/// Size figures for the metrics (docs/metrics.md); 0 = the backend cannot
/// say (a database server's files are not ours to measure).
struct store_stats {
  /// Bytes the store's data take now.
  uint64_t used_bytes = 0;
  /// Bytes the store's files occupy on disk (allocated blocks).
  uint64_t disk_bytes = 0;
};

class session_store {
public:
  /// Longest accepted session id, title, idempotency key (bytes).
  static constexpr size_t max_id_bytes = 128;
  static constexpr size_t max_title_bytes = 1024;
  static constexpr size_t max_key_bytes = 256;

  /// Returns `home + "/sessions"` (the LMDB backend's directory).
  static std::string default_dir(const std::string& home);

  /// The same as open_session_store(opts).
  static store_result<std::unique_ptr<session_store>>
  open(session_store_options opts);

  virtual ~session_store();

  /// The backend's name: "lmdb", "postgres".
  virtual const char* backend() const = 0;

  // -- sessions ---------------------------------------------------------------

  /// Creates a session. Errors: id malformed or taken, parent missing,
  /// fields not UTF-8 or too long.
  virtual store_result<session_info> create_session(const new_session& s) = 0;

  /// Errors: unknown id.
  virtual store_result<session_info>
  get_session(const std::string& id) const = 0;

  /// Sessions, newest (started_at) first.
  virtual store_result<std::vector<session_info>>
  list_sessions(size_t limit, size_t offset) const = 0;

  /// Sessions, newest first, that `keep` accepts: skips the first `offset`
  /// accepted ones and returns up to `limit`; `*more` (may be null) says
  /// whether another accepted session follows. An empty `keep` accepts
  /// all and skips the offset without reading; otherwise it reads (and
  /// decodes) every session it passes, so a deep offset costs a scan.
  virtual store_result<std::vector<session_info>>
  list_sessions_where(size_t limit, size_t offset,
                      const std::function<bool(const session_info&)>& keep,
                      bool* more) const = 0;

  /// Every session started at or after `since_ms` (epoch milliseconds),
  /// newest first, at most `limit`; stops reading at the first older one.
  virtual store_result<std::vector<session_info>>
  list_sessions_since(int64_t since_ms, size_t limit) const = 0;

  /// The ids of the sessions whose parent is `id` (compression
  /// continuations, subagents), in id order. Errors: id malformed.
  virtual store_result<std::vector<std::string>>
  list_children(const std::string& id) const = 0;

  virtual store_status set_title(const std::string& id,
                                 const std::string& title) = 0;

  /// Ends the session (ended_at = `ended_at_ms`, 0 = now). Ending an ended
  /// session keeps the first end and succeeds.
  virtual store_status end_session(const std::string& id,
                                   const std::string& reason,
                                   int64_t ended_at_ms = 0) = 0;

  /// Adds token counts and `api_calls` model calls to the counters.
  virtual store_status add_usage(const std::string& id,
                                 const token_usage& usage,
                                 int64_t api_calls = 1) = 0;

  /// Deletes the session, its messages, keys, index postings, approvals
  /// and responses (and what other stores keep per session, through the
  /// backend's delete hooks) in one transaction. Children keep their
  /// parent_session_id. Works on a full disk (LMDB: see
  /// lmdb_session_store::delete_session).
  virtual store_status delete_session(const std::string& id) = 0;

  // -- approvals --------------------------------------------------------------

  /// The pattern keys approved for the whole of session `id` (empty when
  /// none; the session need not exist). Errors: id malformed, read failure.
  virtual store_result<std::vector<std::string>>
  get_approvals(const std::string& id) const = 0;
  /// Replaces them (at most 256 keys of at most 200 bytes, no newlines).
  virtual store_status set_approvals(const std::string& id,
                                     const std::vector<std::string>& keys) = 0;

  // -- responses (docs/serve.md, "Responses API") ----------------------------

  /// Stores `r` in one transaction (replacing a row with its id), indexed
  /// under its session so that delete_session removes it. Errors: ids
  /// malformed (invalid_argument), unknown session (not_found), a
  /// read-only store.
  virtual store_status put_response(const stored_response& r) = 0;
  /// Errors: id malformed (invalid_argument), unknown id (not_found), a
  /// damaged row or one of a newer version (data_corrupt).
  virtual store_result<stored_response>
  get_response(const std::string& id) const = 0;
  /// Errors: id malformed (invalid_argument), unknown id (not_found).
  virtual store_status delete_response(const std::string& id) = 0;
  /// The responses stored under session `session_id`, in id order (none
  /// for an unknown session). Errors: id malformed (invalid_argument), a
  /// damaged row (data_corrupt, naming it).
  virtual store_result<std::vector<stored_response>>
  list_responses(const std::string& session_id) const = 0;
  /// The id of the session's last message, 0 when it has none. Errors:
  /// unknown session (not_found).
  virtual store_result<uint64_t>
  last_message_id(const std::string& session_id) const = 0;

  // -- scheduled jobs (docs/cron.md, "Storage") -----------------------------
  //
  // Records are opaque here: the caller (cron/) validates them. Every
  // write is one transaction. Errors: a malformed id (invalid_argument),
  // an unknown job or run (not_found), a record that does not decode
  // (data_corrupt, naming it), a read-only store written before the cron
  // databases (unavailable for writes; reads find nothing).

  /// Inserts or replaces job `j` (the whole record).
  virtual store_status put_cron_job(const cron_job_record& j) = 0;
  virtual store_result<cron_job_record>
  get_cron_job(const std::string& id) const = 0;
  /// Every job in id order (only enabled, unpaused ones with
  /// `schedulable_only`: what the scheduler loads at start-up). Records
  /// that do not decode are listed in `damaged`, not returned.
  virtual store_result<cron_job_list>
  list_cron_jobs(bool schedulable_only = false) const = 0;
  /// Deletes the job and its run history in one transaction. A damaged
  /// record can be deleted.
  virtual store_status delete_cron_job(const std::string& id) = 0;
  /// Read-modify-write of job `id` in one transaction: `fn` gets the
  /// stored record and changes it (returning an error aborts, nothing is
  /// written; its code is kept). `fn` may run more than once (the backend
  /// retries the transaction): no side effects outside `j`.
  /// Returns the record as written.
  virtual store_result<cron_job_record>
  update_cron_job(const std::string& id,
                  const std::function<status(cron_job_record& j)>& fn) = 0;
  /// Inserts run `r` (a new id: newest of its job) or replaces the stored
  /// run with the same id in place. The job must exist. After an insert,
  /// the job keeps its `keep` newest runs (older ones are deleted; 0 =
  /// keep all).
  virtual store_status put_cron_run(const cron_run_record& r, size_t keep) = 0;
  virtual store_result<cron_run_record>
  get_cron_run(const std::string& id) const = 0;
  /// The job's runs, newest first: skips `offset`, returns up to `limit`;
  /// `*more` (may be null) says whether older ones follow. Errors: job id
  /// malformed; a damaged run is an error naming it. An unknown job has no
  /// runs (empty list).
  virtual store_result<std::vector<cron_run_record>>
  list_cron_runs(const std::string& job_id, size_t limit, size_t offset,
                 bool* more = nullptr) const = 0;
  /// Applies a batch of engine changes in ONE transaction (jobs put, runs
  /// put with `keep` as in put_cron_run, jobs deleted): all or nothing. A
  /// run of a job that is neither stored nor put in the batch is dropped
  /// (its job was deleted while it ran), not an error.
  virtual store_status apply_cron_changes(const cron_changes& c,
                                          size_t keep) = 0;

  // -- messages ---------------------------------------------------------------

  /// Appends one message in one committed transaction, updating the
  /// session counters (message_count, tool_call_count) and the full-text
  /// index. Errors: unknown session, role not system/user/assistant/tool,
  /// a tool message without tool_call_id, a tool call without id or name,
  /// text that is not UTF-8, a message over max_message_bytes.
  virtual store_result<append_outcome>
  append_message(const std::string& session_id, const chat_message& m,
                 const std::string& key = {}) = 0;

  /// Appends several messages (any sessions) in ONE transaction: all or
  /// nothing. Outcomes are in input order.
  virtual store_result<std::vector<append_outcome>>
  append_batch(const std::vector<pending_append>& batch) = 0;

  /// Group commit: applies `writes` in order in ONE write transaction (one
  /// fsync). Each write is checked on its own: one that is rejected (bad
  /// input, unknown session, taken id...) changes nothing and gets its
  /// error in `status`, and the others still commit. When the transaction
  /// itself fails (disk full, I/O error) nothing is stored and every write
  /// gets that failure. Returns the transaction's status. Every write with
  /// an ok `status` is durable when this returns.
  virtual store_status commit_group(std::vector<store_write>& writes) = 0;

  /// The session's messages in order. Errors: unknown session.
  virtual store_result<std::vector<stored_message>>
  load_messages(const std::string& session_id) const = 0;

  // -- search -----------------------------------------------------------------

  /// Ranked full-text search (LMDB: BM25; see docs/storage.md for how
  /// each backend ranks). Errors: a query without words, an
  /// unknown role or session, limit outside 1..1000.
  virtual store_result<search_results>
  search(const search_request& req) const = 0;

  // -- maintenance ------------------------------------------------------------

  /// Checks the store's consistency: counters match messages, the search
  /// index matches the messages (with `deep`, every message's words), every
  /// stored response belongs to an existing session. Returns the problems
  /// found (at most 20 listed) as an error.
  virtual store_status verify(bool deep = false) const = 0;

  /// The schema version found (after migration when read-write). Each
  /// backend numbers its own schema.
  virtual int schema_version() const = 0;
  /// Total messages stored.
  virtual store_result<uint64_t> message_count() const = 0;
  /// Size figures (cheap: no scan of the data).
  virtual store_stats stats() const = 0;

protected:
  session_store() = default;
  session_store(const session_store&) = delete;
  session_store& operator=(const session_store&) = delete;
};

/// Opens the store that `opts.backend` names: creates it unless
/// read-only, and migrates an older schema as that backend does (LMDB:
/// always when read-write; PostgreSQL: with `auto_migrate`). Errors: an
/// unknown or unregistered backend (config_invalid, naming it and the
/// backends this build has), and the backend's own open errors.
store_result<std::unique_ptr<session_store>>
open_session_store(const session_store_options& opts);

} // namespace mibyan
