// The PostgreSQL session store, part: appending (one message, a batch, a
// group commit) and loading messages.
#include "storage/postgres/pg_session_store.hpp"

#include <map>

#include "storage/lmdb/fts_index.hpp"
#include "storage/postgres/pg_store_detail.hpp"
#include "storage/session_lease.hpp"
#include "storage/store_checks.hpp"

namespace mibyan {

using namespace store_checks;
using pg::param;

namespace {

// The sessions a write transaction touched, written back once at its end.
struct touched_sessions {
  std::map<std::string, session_info> rows;
  std::map<std::string, bool> dirty;

  // The locked row of `id` (locked now if it was not yet: a session
  // created earlier in the same transaction).
  status get(pg::connection& c, const std::string& id, session_info*& out,
             const char* what) {
    auto it = rows.find(id);
    if (it == rows.end()) {
      session_info s;
      if (auto st = pgd::read_session(c, id, s, true, what); !st)
        return st;
      it = rows.emplace(id, std::move(s)).first;
    }
    out = &it->second;
    return {};
  }

  status flush(pg::connection& c, const char* what) {
    for (auto& [id, d] : dirty)
      if (d)
        if (auto st = pgd::write_session(c, rows.at(id), what); !st)
          return st;
    return {};
  }
};

// Appends `p` in the transaction: every check comes before the INSERT, so
// a rejected append changes nothing.
status append_in(pg::connection& c, touched_sessions& ts,
                 const pending_append& p, int64_t stamp, append_outcome& out,
                 const char* what) {
  out = append_outcome{};
  if (!p.key.empty() && p.key.front() == '_') {
    out.skipped = true;
    return {};
  }
  session_info* s = nullptr;
  if (auto st = ts.get(c, p.session_id, s, what); !st)
    return st;
  if (!p.key.empty()) {
    auto d = c.exec("SELECT id FROM mibyan_messages WHERE session_id = $1 "
                    "AND idem_key = $2",
                    {param{p.session_id}, param::bytes(p.key)}, what);
    if (!d)
      return d.get_status();
    if (d->size() > 0) {
      out.id = static_cast<uint64_t>(d->i64(0, 0));
      out.duplicate = true;
      return {};
    }
  }
  auto n = c.exec("SELECT nextval('mibyan_message_ids')", {}, what);
  if (!n)
    return n.get_status();
  stored_message sm;
  sm.id = static_cast<uint64_t>(n->i64(0, 0));
  sm.session_id = p.session_id;
  sm.key = p.key;
  sm.message = p.message;
  if (sm.message.timestamp_ms == 0)
    sm.message.timestamp_ms = stamp;
  auto ins = c.exec(
    "INSERT INTO mibyan_messages (id, session_id, idem_key, role, "
    "tool_calls, record, tsv) VALUES ($1, $2, $3, $4, $5, $6, $7::tsvector)",
    {param{sm.id}, param{p.session_id},
     p.key.empty() ? param{} : param::bytes(p.key), param{p.message.role},
     param{static_cast<int64_t>(p.message.tool_calls.size())},
     param::bytes(encode_message(sm)),
     param{pgd::tsvector_text(indexed_text(p.message))}},
    what);
  if (!ins)
    return ins.get_status();
  s->message_count += 1;
  s->tool_call_count += static_cast<int64_t>(p.message.tool_calls.size());
  ts.dirty[p.session_id] = true;
  out.id = sm.id;
  return {};
}

} // namespace

store_result<std::vector<append_outcome>>
pg_session_store::do_append_batch(const std::vector<pending_append>& batch,
                                  const int64_t stamp) {
  using result = store_result<std::vector<append_outcome>>;
  const char* what = "append_batch";
  std::vector<append_outcome> outcomes;
  auto st = write_txn(what, [&](pg::connection& c) {
    outcomes.assign(batch.size(), append_outcome{});
    touched_sessions ts;
    std::vector<std::string> ids;
    for (auto& p : batch)
      ids.push_back(p.session_id);
    if (auto s = pgd::lock_sessions(c, ids, ts.rows, what); !s)
      return s;
    for (size_t i = 0; i < batch.size(); ++i)
      if (auto s = append_in(c, ts, batch[i], stamp, outcomes[i], what); !s)
        return s;
    return ts.flush(c, what);
  });
  if (!st)
    return result{st};
  return result{std::move(outcomes)};
}

namespace {

// A refusal of one write (the others still commit) rather than a failure
// of the transaction.
bool is_refusal(const status& st) {
  return st.code == status_code::invalid_argument
         || st.code == status_code::not_found;
}

} // namespace

store_status pg_session_store::do_commit_group(
  std::vector<store_write>& writes, const std::vector<char>& valid,
  const std::vector<session_info>& prepared, const int64_t stamp) {
  return write_txn("group commit", [&](pg::connection& c) {
    touched_sessions ts;
    std::vector<std::string> ids;
    for (size_t i = 0; i < writes.size(); ++i) {
      if (valid[i] == 0)
        continue;
      auto& w = writes[i];
      if (w.what == store_write::kind::append)
        ids.push_back(w.append.session_id);
      else if (w.what != store_write::kind::create)
        ids.push_back(w.session_id);
    }
    if (auto s = pgd::lock_sessions(c, ids, ts.rows, "group commit"); !s)
      return s;
    for (size_t i = 0; i < writes.size(); ++i) {
      if (valid[i] == 0)
        continue;
      auto& w = writes[i];
      w.status = {};
      const char* what = write_op_name(w.what);
      status r;
      if (w.fence != 0 && w.what != store_write::kind::create) {
        // Fencing (storage/session_lease.hpp): the lease row is
        // share-locked until this transaction ends, so no new grant slips
        // in between this check and the commit.
        const auto& sid = w.what == store_write::kind::append
                            ? w.append.session_id
                            : w.session_id;
        auto l = c.exec("SELECT token, holder FROM mibyan_leases WHERE "
                        "name = $1 FOR SHARE",
                        {param{session_lease_name(sid)}}, what);
        if (!l)
          return l.get_status();
        if (l->size() > 0 && static_cast<uint64_t>(l->i64(0, 0)) > w.fence) {
          // The same code and message as LMDB (lmdb_check_fence).
          w.status = status::failure(
            status_code::permission_denied,
            std::string{what} + ": " + fenced_prefix + "session '" + sid
              + "' is now run by " + l->str(0, 1) + " (lease token "
              + std::to_string(l->i64(0, 0)) + "); this writer holds token "
              + std::to_string(w.fence));
          continue;
        }
      }
      switch (w.what) {
        case store_write::kind::create:
          w.created = prepared[i];
          r = create_in(c, w.created, w.created.id.empty(), what);
          break;
        case store_write::kind::append:
          r = append_in(c, ts, w.append, stamp, w.appended, what);
          break;
        case store_write::kind::usage:
        case store_write::kind::end: {
          session_info* s = nullptr;
          r = ts.get(c, w.session_id, s, what);
          if (r && w.what == store_write::kind::usage)
            apply_usage(*s, w.usage, w.api_calls);
          else if (r)
            apply_end(*s, w.reason, stamp);
          if (r)
            ts.dirty[w.session_id] = true;
          break;
        }
      }
      // A refused write changed nothing (every step checks before it
      // writes); a database failure aborts the whole group.
      if (!r && is_refusal(r) && c.last_sqlstate().empty())
        w.status = r;
      else if (!r)
        return r;
    }
    return ts.flush(c, "group commit");
  });
}

store_result<std::vector<stored_message>>
pg_session_store::do_load_messages(const std::string& session_id) const {
  using result = store_result<std::vector<stored_message>>;
  std::vector<stored_message> out;
  // One statement (one snapshot, one round trip): no row at all means no
  // session; a row without a record is a session without messages.
  auto st = read("load_messages", [&](pg::connection& c) {
    out.clear();
    auto r = c.exec("SELECT m.record, m.id FROM mibyan_sessions s LEFT JOIN "
                    "mibyan_messages m ON m.session_id = s.id WHERE s.id = "
                    "$1 ORDER BY m.id",
                    {param{session_id}}, "load_messages");
    if (!r)
      return r.get_status();
    if (r->size() == 0)
      return status::failure(status_code::not_found,
                             "load_messages: session '" + session_id
                               + "' does not exist");
    out.reserve(static_cast<size_t>(r->size()));
    for (int i = 0; i < r->size(); ++i) {
      if (r->null(i, 0))
        continue;
      stored_message m;
      if (!decode_message(r->bytes(i, 0), m))
        return status::failure(status_code::data_corrupt,
                               "load_messages: message "
                                 + std::to_string(r->i64(i, 1))
                                 + " is damaged or of a newer version");
      out.push_back(std::move(m));
    }
    return status{};
  });
  if (!st)
    return result{st};
  return result{std::move(out)};
}

store_result<uint64_t> pg_session_store::message_count() const {
  uint64_t n = 0;
  auto st = read("message_count", [&](pg::connection& c) {
    auto r = c.exec("SELECT count(*) FROM mibyan_messages", {},
                    "message_count");
    if (!r)
      return r.get_status();
    n = static_cast<uint64_t>(r->i64(0, 0));
    return status{};
  });
  if (!st)
    return store_result<uint64_t>{st};
  return store_result<uint64_t>{n};
}

uint64_t pg_session_store::database_bytes() const {
  uint64_t n = 0;
  (void) read("database_bytes", [&](pg::connection& c) {
    auto r = c.exec("SELECT pg_database_size(current_database())", {},
                    "database_bytes");
    if (!r)
      return r.get_status();
    n = static_cast<uint64_t>(r->i64(0, 0));
    return status{};
  });
  return n;
}

} // namespace mibyan
