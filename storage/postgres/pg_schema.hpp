// File: storage/postgres/pg_schema.hpp
//
// The PostgreSQL store's tables (all named mibyan_*, so the store can share
// a database with other applications) and their versioned migrations
// (docs/storage.md, "PostgreSQL: schema and migrations").
//
//   mibyan_schema     one row: the schema version
//   mibyan_sessions   id, started_at_ms, parent_session_id, record (the
//                     session as the same JSON object LMDB keeps)
//   mibyan_messages   id (from the sequence mibyan_message_ids), session_id
//                     (cascade-deleted with the session), idem_key (bytea,
//                     unique per session), role, record (the stored_message
//                     in LMDB's binary encoding, byte for byte), tsv (the
//                     words of indexed_text() with their positions, from
//                     Mibyan's own tokenizer; GIN index)
//   mibyan_approvals  session_id -> approved pattern keys
//   mibyan_responses  id, session_id (cascade), record (stored_response)
//   mibyan_cron_jobs  id, record; mibyan_cron_runs id, job_id (cascade),
//                     seq (insertion order, from mibyan_cron_run_seq),
//                     record
//   mibyan_leases     name, holder, token (from mibyan_lease_tokens, so
//                     tokens only grow), expires_at_ms, released
//                     (storage/session_lease.hpp; fencing of writes)
//   mibyan_prompts    hash -> prompt text; mibyan_session_prompts
//                     session_id -> hash (storage/prompt_store.hpp)
//   mibyan_checkpoints session_id -> seq, bytes (the latest kernel
//                     checkpoint, storage/checkpoint_store.hpp)
//   mibyan_user_state (kind, name) -> version (from the sequence
//                     mibyan_user_state_versions), updated_at_ms, bytes:
//                     memory, skills and allowlist grants shared by the
//                     gateways (storage/user_state_store.hpp; version 2)
//   The prompts, checkpoints and leases are keyed by session id without a foreign key (their
//   owners may write before the session row exists); delete_session
//   removes them in its transaction.
//
// Every step runs in one transaction under an advisory lock, with the
// version bump: gateways starting at the same time migrate once, and an
// interrupted migration resumes at the failed step.
#pragma once

#include <functional>

#include "storage/postgres/pg_connection.hpp"

namespace mibyan::pg {

/// The schema this build writes.
constexpr int schema_version_current = 2;

/// The version recorded in the database (0 when it has no Mibyan tables).
result<int> read_schema_version(connection& c);

/// Brings the schema to schema_version_current, step by step. Returns the
/// version found before. Errors: a database newer than this build
/// (data_corrupt, "upgrade mibyan"), the statements' errors.
result<int> migrate_schema(connection& c,
                           const std::function<void(int, int)>& on_step);

} // namespace mibyan::pg
