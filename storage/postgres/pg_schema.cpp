#include "storage/postgres/pg_schema.hpp"

#include <string>

namespace mibyan::pg {

namespace {

// The advisory lock every migration takes ("mibyan" in ASCII).
constexpr const char* lock_sql = "SELECT pg_advisory_xact_lock(109105098121)";

// Step N brings version N-1 to N.
const char* const steps[] = {
  // 1: the first layout.
  R"sql(
CREATE TABLE mibyan_schema (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  version integer NOT NULL);
INSERT INTO mibyan_schema (version) VALUES (0);
CREATE TABLE mibyan_sessions (
  id text COLLATE "C" PRIMARY KEY,
  started_at_ms bigint NOT NULL,
  parent_session_id text COLLATE "C" NOT NULL DEFAULT '',
  record text NOT NULL);
CREATE INDEX mibyan_sessions_by_time
  ON mibyan_sessions (started_at_ms DESC, id DESC);
CREATE INDEX mibyan_sessions_by_parent
  ON mibyan_sessions (parent_session_id, id) WHERE parent_session_id <> '';
CREATE SEQUENCE mibyan_message_ids;
CREATE TABLE mibyan_messages (
  id bigint PRIMARY KEY,
  session_id text COLLATE "C" NOT NULL
    REFERENCES mibyan_sessions (id) ON DELETE CASCADE,
  idem_key bytea,
  role text NOT NULL,
  tool_calls integer NOT NULL,
  record bytea NOT NULL,
  tsv tsvector NOT NULL);
CREATE INDEX mibyan_messages_by_session ON mibyan_messages (session_id, id);
CREATE UNIQUE INDEX mibyan_messages_by_key
  ON mibyan_messages (session_id, idem_key) WHERE idem_key IS NOT NULL;
CREATE INDEX mibyan_messages_fts ON mibyan_messages USING gin (tsv);
CREATE TABLE mibyan_approvals (
  session_id text COLLATE "C" PRIMARY KEY,
  keys text NOT NULL);
CREATE TABLE mibyan_responses (
  id text COLLATE "C" PRIMARY KEY,
  session_id text COLLATE "C" NOT NULL
    REFERENCES mibyan_sessions (id) ON DELETE CASCADE,
  record bytea NOT NULL);
CREATE INDEX mibyan_responses_by_session ON mibyan_responses (session_id);
CREATE TABLE mibyan_cron_jobs (
  id text COLLATE "C" PRIMARY KEY,
  record bytea NOT NULL);
CREATE SEQUENCE mibyan_cron_run_seq;
CREATE TABLE mibyan_cron_runs (
  id text COLLATE "C" PRIMARY KEY,
  job_id text COLLATE "C" NOT NULL
    REFERENCES mibyan_cron_jobs (id) ON DELETE CASCADE,
  seq bigint NOT NULL,
  record bytea NOT NULL);
CREATE INDEX mibyan_cron_runs_by_job ON mibyan_cron_runs (job_id, seq);
CREATE TABLE mibyan_leases (
  name text COLLATE "C" PRIMARY KEY,
  holder text NOT NULL,
  token bigint NOT NULL,
  expires_at_ms bigint NOT NULL,
  released boolean NOT NULL);
CREATE INDEX mibyan_leases_by_holder ON mibyan_leases (holder);
CREATE SEQUENCE mibyan_lease_tokens;
CREATE TABLE mibyan_prompts (
  hash text COLLATE "C" PRIMARY KEY,
  prompt bytea NOT NULL);
CREATE TABLE mibyan_session_prompts (
  session_id text COLLATE "C" PRIMARY KEY,
  hash text COLLATE "C" NOT NULL REFERENCES mibyan_prompts (hash));
CREATE INDEX mibyan_session_prompts_by_hash
  ON mibyan_session_prompts (hash);
CREATE TABLE mibyan_checkpoints (
  session_id text COLLATE "C" PRIMARY KEY,
  seq bigint NOT NULL,
  bytes bytea NOT NULL);
)sql",
  // 2: per-user state shared by the gateways (storage/user_state_store.hpp).
  R"sql(
CREATE SEQUENCE mibyan_user_state_versions;
CREATE TABLE mibyan_user_state (
  kind smallint NOT NULL,
  name text COLLATE "C" NOT NULL,
  version bigint NOT NULL,
  updated_at_ms bigint NOT NULL,
  bytes bytea NOT NULL,
  PRIMARY KEY (kind, name));
)sql",
};

static_assert(sizeof steps / sizeof steps[0] == schema_version_current,
              "one step per version");

status too_new(int found) {
  return status::failure(
    status_code::data_corrupt,
    "the PostgreSQL store's schema version " + std::to_string(found)
      + " is newer than this build supports ("
      + std::to_string(schema_version_current) + "); upgrade mibyan");
}

} // namespace

result<int> read_schema_version(connection& c) {
  // A query of the catalog table (not to_regclass, whose name lookup may
  // answer from a cache that predates another process's migration).
  auto t = c.exec("SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_tables WHERE "
                  "schemaname = current_schema() AND tablename = "
                  "'mibyan_schema')",
                  {}, "read schema version");
  if (!t)
    return result<int>{t.get_status()};
  if (!t->boolean(0, 0))
    return result<int>{0};
  auto v = c.exec("SELECT version FROM mibyan_schema", {},
                  "read schema version");
  if (!v)
    return result<int>{v.get_status()};
  if (v->size() != 1)
    return result<int>::failure(status_code::data_corrupt,
                                "read schema version: mibyan_schema has "
                                  + std::to_string(v->size())
                                  + " rows, expected 1");
  return result<int>{static_cast<int>(v->i64(0, 0))};
}

result<int> migrate_schema(connection& c,
                           const std::function<void(int, int)>& on_step) {
  auto first = read_schema_version(c);
  if (!first)
    return first;
  if (*first > schema_version_current)
    return result<int>{too_new(*first)};
  const int found = *first;
  for (;;) {
    if (auto st = c.run("BEGIN", "migrate schema"); !st)
      return result<int>{st};
    auto rollback = [&](status st) {
      (void) c.run("ROLLBACK", "migrate schema");
      return result<int>{std::move(st)};
    };
    if (auto st = c.run(lock_sql, "migrate schema: lock"); !st)
      return rollback(st);
    // Read again under the lock: another process may have migrated.
    auto v = read_schema_version(c);
    if (!v)
      return rollback(v.get_status());
    if (*v > schema_version_current)
      return rollback(too_new(*v));
    if (*v == schema_version_current) {
      (void) c.run("COMMIT", "migrate schema");
      return result<int>{found};
    }
    const int from = *v;
    if (auto st = c.run(steps[from], "migrate schema"); !st)
      return rollback(st);
    auto bump = c.exec("UPDATE mibyan_schema SET version = $1",
                       {param{from + 1}}, "migrate schema: record version");
    if (!bump)
      return rollback(bump.get_status());
    if (on_step)
      on_step(from, from + 1);
    if (auto st = c.run("COMMIT", "migrate schema: commit"); !st)
      return result<int>{st};
  }
}

} // namespace mibyan::pg
