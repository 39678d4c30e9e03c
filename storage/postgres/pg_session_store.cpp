// The PostgreSQL session store: opening, migration, transactions, sessions
// and approvals. Messages: pg_messages.cpp; search and verify:
// pg_search.cpp; responses: pg_responses.cpp; cron: pg_cron.cpp.
#include "storage/postgres/pg_session_store.hpp"

#include <algorithm>
#include <chrono>
#include <random>
#include <set>

#include "base/json.hpp"
#include "storage/postgres/pg_pool.hpp"
#include "storage/postgres/pg_schema.hpp"
#include "storage/postgres/pg_store_detail.hpp"
#include "storage/session_id.hpp"
#include "storage/store_checks.hpp"

namespace mibyan {

using namespace store_checks;
using pg::param;

namespace {

constexpr int max_txn_attempts = 5;

pg::pool_options pool_options_of(const pg_store_options& o) {
  pg::pool_options po;
  po.connect.url = o.url;
  po.connect.password = o.password;
  po.connect.connect_timeout_s = o.connect_timeout_s;
  po.size = std::clamp<size_t>(o.pool_size, 1, 256);
  return po;
}

} // namespace

// -- open and migrate ---------------------------------------------------------

store_result<std::unique_ptr<pg_session_store>>
pg_session_store::open(pg_store_options opts) {
  using res = store_result<std::unique_ptr<pg_session_store>>;
  std::unique_ptr<pg_session_store> self{new pg_session_store};
  self->pool_ = std::make_unique<pg::pool>(pool_options_of(opts));
  self->set_common_options(opts.max_message_bytes, opts.now_ms);
  self->opts_ = std::move(opts);
  auto lease = self->pool_->acquire();
  if (!lease)
    return res::failure(lease.code, "open session store: " + lease.error);
  auto& c = **lease;
  auto found = pg::read_schema_version(c);
  if (!found)
    return res::failure(found.code, "open session store: " + found.error);
  int v = *found;
  if (v > pg::schema_version_current) {
    auto m = pg::migrate_schema(c, {});  // produces the refusal
    return res::failure(m.ok() ? status_code::data_corrupt : m.code,
                        "open session store: " + m.error);
  }
  if (v < pg::schema_version_current) {
    if (self->opts_.read_only || !self->opts_.auto_migrate)
      return res::failure(
        v == 0 ? status_code::not_found : status_code::config_invalid,
        "open session store: the PostgreSQL database at " + c.where()
          + (v == 0 ? " has no Mibyan schema yet"
                    : " has schema version " + std::to_string(v)
                        + ", this build needs "
                        + std::to_string(pg::schema_version_current))
          + "; run `mibyan store migrate` or set storage.auto_migrate: true");
    auto m = pg::migrate_schema(c, self->opts_.on_migrate);
    if (!m)
      return res::failure(m.code, "open session store: " + m.error);
  }
  self->schema_version_ = pg::schema_version_current;
  return res{std::move(self)};
}

pg_store_options
pg_session_store::options_from(const session_store_options& opts) {
  pg_store_options o;
  o.url = opts.postgres_url;
  o.password = opts.postgres_password;
  o.pool_size = opts.postgres_pool_size;
  o.auto_migrate = opts.auto_migrate;
  o.read_only = opts.read_only;
  o.max_message_bytes = opts.max_message_bytes;
  o.now_ms = opts.now_ms;
  o.on_migrate = opts.on_migrate;
  return o;
}

store_result<std::unique_ptr<pg_session_store>>
pg_session_store::open(const session_store_options& opts) {
  if (opts.postgres_url.empty())
    return store_result<std::unique_ptr<pg_session_store>>::failure(
      status_code::config_invalid,
      "open session store: storage.backend is postgres but "
      "storage.postgres.url is empty");
  return open(options_from(opts));
}

store_result<std::pair<int, int>>
pg_session_store::migrate(const pg_store_options& o) {
  using res = store_result<std::pair<int, int>>;
  auto c = pg::connection::open(pool_options_of(o).connect);
  if (!c)
    return res::failure(c.code, "migrate: " + c.error);
  auto m = pg::migrate_schema(**c, o.on_migrate);
  if (!m)
    return res::failure(m.code, "migrate: " + m.error);
  return res{std::make_pair(*m, pg::schema_version_current)};
}

pg_session_store::~pg_session_store() = default;

status pg_session_store::read_only_refusal(const char* what) const {
  return status::failure(std::string{what}
                         + ": the store was opened read-only");
}

// -- transactions -------------------------------------------------------------

store_status pg_session_store::write_txn(const char* what,
                                         const txn_fn& fn) const {
  if (opts_.read_only)
    return read_only_refusal(what);
  status last;
  for (int attempt = 0; attempt < max_txn_attempts + 8; ++attempt) {
    auto lease = pool_->acquire();
    if (!lease)
      return status::failure(lease.code, std::string{what} + ": "
                                           + lease.error);
    auto& c = **lease;
    if (auto st = c.run("BEGIN", what); !st) {
      lease->discard();
      // A pooled connection that died while idle (the server restarted):
      // nothing was sent, so try a new one.
      if (c.broken() && !lease->fresh()) {
        pool_->drop_idle();
        last = st;
        continue;
      }
      return st;
    }
    status st = fn(c);
    if (!st) {
      std::string state = c.last_sqlstate();
      if (c.broken()) {
        lease->discard();
        return st;  // rolled back by the server with the connection
      }
      (void) c.run("ROLLBACK", what);
      if (pg::pg_retry_txn(state) && attempt < max_txn_attempts) {
        last = st;
        continue;
      }
      return st;
    }
    if (auto cst = c.run("COMMIT", what); !cst) {
      if (c.broken()) {
        lease->discard();
        return status::failure(
          status_code::unavailable,
          cst.error + " (the outcome of this commit is unknown; retry "
                      "with the same idempotency key)");
      }
      if (pg::pg_retry_txn(c.last_sqlstate())
          && attempt < max_txn_attempts) {
        last = cst;
        continue;
      }
      return cst;
    }
    return {};
  }
  return last.ok() ? status::failure(std::string{what} + ": gave up")
                   : last;
}

store_status pg_session_store::read(const char* what, const txn_fn& fn,
                                    bool snapshot) const {
  status last;
  for (int attempt = 0; attempt < 8; ++attempt) {
    auto lease = pool_->acquire();
    if (!lease)
      return status::failure(lease.code, std::string{what} + ": "
                                           + lease.error);
    auto& c = **lease;
    status st;
    if (snapshot)
      st = c.run("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", what);
    if (st)
      st = fn(c);
    if (snapshot && c.broken() == false)
      (void) c.run(st ? "COMMIT" : "ROLLBACK", what);
    if (!st && c.broken()) {
      lease->discard();
      // Reads are safe to run again: once on a new connection.
      if (!lease->fresh()) {
        pool_->drop_idle();
        last = st;
        continue;
      }
    }
    return st;
  }
  return last;
}

// -- sessions -----------------------------------------------------------------

status pg_session_store::create_in(pg::connection& c, session_info& s,
                                   bool generated, const char* what) const {
  if (!s.parent_session_id.empty()) {
    if (s.parent_session_id == s.id)
      return status::failure(status_code::invalid_argument,
                             std::string{what}
                               + ": a session cannot be its own parent");
    // FOR KEY SHARE: the parent cannot be deleted before this commits.
    auto p = c.exec("SELECT 1 FROM mibyan_sessions WHERE id = $1 "
                    "FOR KEY SHARE",
                    {param{s.parent_session_id}}, what);
    if (!p)
      return p.get_status();
    if (p->size() == 0)
      return status::failure(status_code::not_found,
                             std::string{what} + ": parent session '"
                               + s.parent_session_id + "' does not exist");
  }
  std::random_device rd;
  for (int attempt = 0;; ++attempt) {
    if (generated)
      s.id = format_session_id(s.started_at_ms, rd());
    auto ins = c.exec("INSERT INTO mibyan_sessions (id, started_at_ms, "
                      "parent_session_id, record) VALUES ($1, $2, $3, $4) "
                      "ON CONFLICT (id) DO NOTHING",
                      {param{s.id}, param{s.started_at_ms},
                       param{s.parent_session_id}, param{encode_session(s)}},
                      what);
    if (!ins)
      return ins.get_status();
    if (ins->affected() == 1)
      return {};
    if (!generated)
      return status::failure(status_code::invalid_argument,
                             std::string{what} + ": session '" + s.id
                               + "' already exists");
    if (attempt > 64)
      return status::failure(std::string{what}
                             + ": generate a session id: too many "
                               "collisions");
  }
}

store_status pg_session_store::do_create_session(session_info& s,
                                                 bool generated) {
  const session_info prepared = s;
  return write_txn("create_session", [&](pg::connection& c) {
    s = prepared;
    return create_in(c, s, generated, "create_session");
  });
}

store_result<session_info>
pg_session_store::do_get_session(const std::string& id) const {
  using result = store_result<session_info>;
  session_info s;
  auto st = read("get_session", [&](pg::connection& c) {
    return pgd::read_session(c, id, s, false, "get_session");
  });
  if (!st)
    return result{st};
  return result{std::move(s)};
}

store_result<std::vector<std::string>>
pg_session_store::do_list_children(const std::string& id) const {
  using result = store_result<std::vector<std::string>>;
  std::vector<std::string> out;
  auto st = read("list_children", [&](pg::connection& c) {
    out.clear();
    auto r = c.exec("SELECT id FROM mibyan_sessions WHERE "
                    "parent_session_id = $1 AND parent_session_id <> '' "
                    "ORDER BY id",
                    {param{id}}, "list_children");
    if (!r)
      return r.get_status();
    for (int i = 0; i < r->size(); ++i)
      out.push_back(r->str(i, 0));
    return status{};
  });
  if (!st)
    return result{st};
  return result{std::move(out)};
}

store_result<std::vector<session_info>> pg_session_store::list_sessions_where(
  size_t limit, size_t offset,
  const std::function<bool(const session_info&)>& keep, bool* more) const {
  using result = store_result<std::vector<session_info>>;
  std::vector<session_info> out;
  bool has_more = false;
  auto st = read(
    "list_sessions",
    [&](pg::connection& c) {
      out.clear();
      has_more = false;
      if (!keep) {
        // One page (plus one row to answer `more`).
        auto r = c.exec("SELECT record FROM mibyan_sessions ORDER BY "
                        "started_at_ms DESC, id DESC LIMIT $1 OFFSET $2",
                        {param{static_cast<uint64_t>(limit) + 1},
                         param{static_cast<uint64_t>(offset)}},
                        "list_sessions");
        if (!r)
          return r.get_status();
        for (int i = 0; i < r->size(); ++i) {
          if (out.size() == limit) {
            has_more = true;
            break;
          }
          session_info s;
          if (auto d = pgd::decode_session_row(r->bytes(i, 0), s,
                                               "list_sessions");
              !d)
            return d;
          out.push_back(std::move(s));
        }
        return status{};
      }
      // Filtered: walk newest first in chunks (keyset pagination).
      size_t skipped = 0;
      int64_t after_t = 0;
      std::string after_id;
      bool first = true;
      for (;;) {
        auto r = first
                   ? c.exec("SELECT record, started_at_ms, id FROM "
                            "mibyan_sessions ORDER BY started_at_ms DESC, "
                            "id DESC LIMIT 500",
                            {}, "list_sessions")
                   : c.exec("SELECT record, started_at_ms, id FROM "
                            "mibyan_sessions WHERE (started_at_ms, id) < "
                            "($1, $2) ORDER BY started_at_ms DESC, id DESC "
                            "LIMIT 500",
                            {param{after_t}, param{after_id}},
                            "list_sessions");
        first = false;
        if (!r)
          return r.get_status();
        for (int i = 0; i < r->size(); ++i) {
          session_info s;
          if (auto d = pgd::decode_session_row(r->bytes(i, 0), s,
                                               "list_sessions");
              !d)
            return d;
          if (!keep(s))
            continue;
          if (skipped < offset) {
            ++skipped;
            continue;
          }
          if (out.size() == limit) {
            has_more = true;
            return status{};
          }
          out.push_back(std::move(s));
        }
        if (r->size() < 500)
          return status{};
        after_t = r->i64(r->size() - 1, 1);
        after_id = r->str(r->size() - 1, 2);
      }
    },
    true);
  if (!st)
    return result{st};
  if (more)
    *more = has_more;
  return result{std::move(out)};
}

store_result<std::vector<session_info>>
pg_session_store::list_sessions_since(int64_t since_ms, size_t limit) const {
  using result = store_result<std::vector<session_info>>;
  std::vector<session_info> out;
  auto st = read("list_sessions_since", [&](pg::connection& c) {
    out.clear();
    auto r = c.exec("SELECT record FROM mibyan_sessions WHERE "
                    "started_at_ms >= $1 ORDER BY started_at_ms DESC, id "
                    "DESC LIMIT $2",
                    {param{since_ms}, param{static_cast<uint64_t>(limit)}},
                    "list_sessions_since");
    if (!r)
      return r.get_status();
    for (int i = 0; i < r->size(); ++i) {
      session_info s;
      if (auto d = pgd::decode_session_row(r->bytes(i, 0), s,
                                           "list_sessions_since");
          !d)
        return d;
      out.push_back(std::move(s));
    }
    return status{};
  });
  if (!st)
    return result{st};
  return result{std::move(out)};
}

store_status pg_session_store::update_session(
  const std::string& id, const char* what,
  const std::function<void(session_info&)>& fn) {
  return write_txn(what, [&](pg::connection& c) {
    session_info s;
    if (auto st = pgd::read_session(c, id, s, true, what); !st)
      return st;
    fn(s);
    return pgd::write_session(c, s, what);
  });
}

store_status pg_session_store::do_delete_session(const std::string& id) {
  // Messages, responses and every other table that references the
  // session (ON DELETE CASCADE) go in this transaction; children keep
  // their parent_session_id (as in LMDB).
  return write_txn("delete_session", [&](pg::connection& c) {
    auto r = c.exec("DELETE FROM mibyan_sessions WHERE id = $1",
                    {param{id}}, "delete_session");
    if (!r)
      return r.get_status();
    if (r->affected() == 0)
      return status::failure(status_code::not_found,
                             "delete_session: session '" + id
                               + "' does not exist");
    // The rows keyed by session id without a foreign key: approvals, the
    // kernel checkpoint, the prompt reference (and the prompt when no
    // other session references it).
    for (const char* sql :
         {"DELETE FROM mibyan_approvals WHERE session_id = $1",
          "DELETE FROM mibyan_checkpoints WHERE session_id = $1",
          "WITH gone AS (DELETE FROM mibyan_session_prompts WHERE "
          "session_id = $1 RETURNING hash) DELETE FROM mibyan_prompts p "
          "USING gone WHERE p.hash = gone.hash AND NOT EXISTS (SELECT 1 "
          "FROM mibyan_session_prompts s WHERE s.hash = gone.hash AND "
          "s.session_id <> $1)"}) {
      auto a = c.exec(sql, {param{id}}, "delete_session");
      if (!a)
        return a.get_status();
    }
    return status{};
  });
}

// -- approvals ----------------------------------------------------------------

store_result<std::vector<std::string>>
pg_session_store::do_get_approvals(const std::string& id) const {
  using result = store_result<std::vector<std::string>>;
  std::vector<std::string> keys;
  auto st = read("get_approvals", [&](pg::connection& c) {
    keys.clear();
    auto r = c.exec("SELECT keys FROM mibyan_approvals WHERE session_id = $1",
                    {param{id}}, "get_approvals");
    if (!r)
      return r.get_status();
    if (r->size() == 0)
      return status{};
    auto v = r->bytes(0, 0);
    size_t pos = 0;
    while (pos < v.size()) {
      auto nl = v.find('\n', pos);
      if (nl == std::string_view::npos)
        nl = v.size();
      if (nl > pos)
        keys.emplace_back(v.substr(pos, nl - pos));
      pos = nl + 1;
    }
    return status{};
  });
  if (!st)
    return result::failure(st.code, st.error);
  return result{std::move(keys)};
}

store_status pg_session_store::do_set_approvals(
  const std::string& id, const std::vector<std::string>& keys) {
  std::string value;
  for (size_t i = 0; i < keys.size(); ++i) {
    // PostgreSQL text holds UTF-8 without NUL bytes.
    if (!check_utf8("approval key", keys[i]).empty()
        || keys[i].find('\0') != std::string::npos)
      return status::failure(status_code::invalid_argument,
                             "set_approvals: invalid key "
                               + std::to_string(i)
                               + " (not UTF-8 or with a NUL byte)");
    value += keys[i] + "\n";
  }
  return write_txn("set_approvals", [&](pg::connection& c) {
    auto r = value.empty()
               ? c.exec("DELETE FROM mibyan_approvals WHERE session_id = $1",
                        {param{id}}, "set_approvals")
               : c.exec("INSERT INTO mibyan_approvals (session_id, keys) "
                        "VALUES ($1, $2) ON CONFLICT (session_id) DO UPDATE "
                        "SET keys = EXCLUDED.keys",
                        {param{id}, param{value}}, "set_approvals");
    return r.get_status();
  });
}

} // namespace mibyan
