// The LMDB session store, part: sessions (create, read, list, update, end,
// delete) and per-session approvals.
#include "storage/lmdb/lmdb_session_store.hpp"

#include "storage/session_id.hpp"
#include "base/json.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <ctime>
#include <map>
#include <random>
#include <unordered_map>

#include "base/json.hpp"
#include "storage/byte_codec.hpp"
#include "storage/lmdb/lmdb_store_detail.hpp"
#include "storage/lmdb/space_reserve.hpp"

namespace mibyan {

using namespace store_detail;

namespace {

// Returned by a walk_newest_first visitor to stop early without an error
// (no LMDB or errno code has this value).
constexpr int walk_done = std::numeric_limits<int>::min();

// Visits sessions_by_time newest first: `fn(started_ms, session_id)`
// returns 0 to go on, walk_done to stop (the walk returns 0) or an error
// code to stop with it. Cursor errors are returned.
template <class F>
int walk_newest_first(MDB_txn* txn, MDB_dbi by_time, F&& fn) {
  cursor_guard cur;
  int rc = mdb_cursor_open(txn, by_time, &cur.c);
  if (rc != 0)
    return rc;
  MDB_val k;
  MDB_val v;
  for (rc = mdb_cursor_get(cur.c, &k, &v, MDB_LAST); rc == 0;
       rc = mdb_cursor_get(cur.c, &k, &v, MDB_PREV)) {
    auto key = lmdb_env::view(k);
    if (key.size() <= 8)
      continue;
    int r = fn(static_cast<int64_t>(codec::read_be64(key.data())),
               key.substr(8));
    if (r == walk_done)
      return 0;
    if (r != 0)
      return r;
  }
  return rc == MDB_NOTFOUND ? 0 : rc;
}

} // namespace

// -- sessions -----------------------------------------------------------------

int lmdb_session_store::create_txn(MDB_txn* txn, session_info& s, bool generated,
                              std::string& error) {
  std::random_device rd;
  std::string_view v;
  if (generated) {
    // YYYYMMDD_HHMMSS_<6 hex>, local time; retry on a collision.
    for (int attempt = 0;; ++attempt) {
      s.id = format_session_id(s.started_at_ms, rd());
      int rc = lmdb_env::get(txn, sessions_, s.id, v);
      if (rc == MDB_NOTFOUND)
        break;
      if (rc != 0 || attempt > 64) {
        error = "generate a session id";
        return rc != 0 ? rc : lmdb_env::user_error;
      }
    }
  } else {
    int rc = lmdb_env::get(txn, sessions_, s.id, v);
    if (rc == 0) {
      error = "session '" + s.id + "' already exists";
      return lmdb_env::user_error;
    }
    if (rc != MDB_NOTFOUND)
      return rc;
  }
  if (!s.parent_session_id.empty()) {
    if (s.parent_session_id == s.id) {
      error = "a session cannot be its own parent";
      return lmdb_env::user_error;
    }
    int rc = lmdb_env::get(txn, sessions_, s.parent_session_id, v);
    if (rc == MDB_NOTFOUND) {
      error = "parent session '" + s.parent_session_id
              + "' does not exist";
      return lmdb_env::missing_error;
    }
    if (rc == 0)
      rc = lmdb_env::put(txn, children_,
                         sub_key(s.parent_session_id, s.id), {});
    if (rc != 0) {
      error = "link to parent";
      return rc;
    }
  }
  int rc = write_session(txn, sessions_, s, error);
  if (rc == 0 && (rc = lmdb_env::put(txn, by_time_,
                                     time_key(s.started_at_ms, s.id),
                                     {}))
                   != 0)
    error = "index session start time";
  return rc;
}

store_status lmdb_session_store::do_create_session(session_info& s,
                                                   bool generated) {
  return env_->write(
    [&](MDB_txn* txn, std::string& error) {
      return create_txn(txn, s, generated, error);
    },
    "create_session");
}

store_result<session_info>
lmdb_session_store::do_get_session(const std::string& id) const {
  using result = store_result<session_info>;
  session_info s;
  auto st = env_->read(
    [&](MDB_txn* txn, std::string& error) {
      return read_session(txn, sessions_, id, s, error);
    },
    "get_session");
  if (!st)
    return result{st};
  return result{s};
}

store_result<std::vector<std::string>>
lmdb_session_store::do_list_children(const std::string& id) const {
  using result = store_result<std::vector<std::string>>;
  std::vector<std::string> out;
  auto prefix = sub_key(id, "");
  auto st = env_->read(
    [&](MDB_txn* txn, std::string&) {
      out.clear();
      return scan_prefix(txn, children_, prefix,
                         [&](std::string_view k, std::string_view) {
                           out.emplace_back(k.substr(prefix.size()));
                           return 0;
                         });
    },
    "list_children");
  if (!st)
    return result{st};
  return result{out};
}

store_result<std::vector<session_info>> lmdb_session_store::list_sessions_where(
  size_t limit, size_t offset,
  const std::function<bool(const session_info&)>& keep, bool* more) const {
  using result = store_result<std::vector<session_info>>;
  std::vector<session_info> out;
  bool has_more = false;
  auto st = env_->read(
    [&](MDB_txn* txn, std::string& error) {
      out.clear();
      has_more = false;
      size_t skipped = 0;
      // For an accepted session: 1 to skip it (offset), walk_done when
      // the page is full, 0 to take it.
      auto place = [&] {
        if (skipped < offset) {
          ++skipped;
          return 1;
        }
        if (out.size() == limit) {
          has_more = true;
          return walk_done;
        }
        return 0;
      };
      return walk_newest_first(
        txn, by_time_, [&](int64_t, std::string_view id) {
          if (!keep) // decides before reading
            if (int p = place(); p != 0)
              return p == 1 ? 0 : p;
          session_info s;
          if (int r = read_session(txn, sessions_, std::string{id}, s, error);
              r != 0)
            return r;
          if (keep) {
            if (!keep(s))
              return 0;
            if (int p = place(); p != 0)
              return p == 1 ? 0 : p;
          }
          out.push_back(std::move(s));
          return 0;
        });
    },
    "list_sessions");
  if (!st)
    return result{st};
  if (more)
    *more = has_more;
  return result{std::move(out)};
}

store_result<std::vector<session_info>>
lmdb_session_store::list_sessions_since(int64_t since_ms, size_t limit) const {
  using result = store_result<std::vector<session_info>>;
  std::vector<session_info> out;
  auto st = env_->read(
    [&](MDB_txn* txn, std::string& error) {
      out.clear();
      return walk_newest_first(
        txn, by_time_, [&](int64_t started, std::string_view id) {
          if (out.size() >= limit || started < since_ms)
            return walk_done;
          session_info s;
          if (int r = read_session(txn, sessions_, std::string{id}, s, error);
              r != 0)
            return r;
          out.push_back(std::move(s));
          return 0;
        });
    },
    "list_sessions_since");
  if (!st)
    return result{st};
  return result{std::move(out)};
}

store_status lmdb_session_store::update_session(
  const std::string& id, const char* what,
  const std::function<void(session_info&)>& fn) {
  return env_->write(
    [&](MDB_txn* txn, std::string& error) {
      session_info s;
      if (int rc = read_session(txn, sessions_, id, s, error); rc != 0)
        return rc;
      fn(s);
      return write_session(txn, sessions_, s, error);
    },
    what);
}

store_status lmdb_session_store::do_delete_session(const std::string& id) {
  // With room on the disk a delete is one write transaction. On a disk
  // short of space the reserve's blocks pay for the pages LMDB copies
  // while deleting, so a delete works on a full disk
  // (storage/lmdb/space_reserve.hpp).
  if (!space_is_short(env_->dir()))
    return delete_session_txn(id);
  release_reserve(env_->dir());
  auto st = delete_session_txn(id);
  // LMDB reuses the pages a transaction freed only once another one has
  // committed after it: without this, the next delete on a still full
  // disk could not use the pages this one freed. Best effort.
  if (st)
    (void) settle_free_pages();
  (void) ensure_reserve(env_->dir());
  return st;
}

store_status lmdb_session_store::settle_free_pages() {
  // Rewrites the schema version with its own value: a transaction that
  // changes nothing but still commits.
  return env_->write(
    [&](MDB_txn* txn, std::string& error) {
      int rc = lmdb_env::put(txn, meta_, version_key,
                             std::to_string(schema_version_));
      if (rc != 0)
        error = "rewrite schema version";
      return rc;
    },
    "settle free pages");
}

store_status lmdb_session_store::delete_session_txn(const std::string& id) {
  return env_->write(
    [&](MDB_txn* txn, std::string& error) {
      session_info s;
      if (int rc = read_session(txn, sessions_, id, s, error); rc != 0)
        return rc;
      // Collect first: deleting while a cursor walks the same database
      // would need cursor-relative deletes.
      std::vector<std::pair<std::string, uint64_t>> msgs;  // key, id
      std::vector<std::string> texts;
      int rc = scan_prefix(txn, msgs_, sub_key(id, ""),
                           [&](std::string_view k, std::string_view v) {
                             stored_message m;
                             if (!decode_message(v, m))
                               return static_cast<int>(MDB_CORRUPTED);
                             msgs.emplace_back(std::string{k}, m.id);
                             texts.push_back(indexed_text(m.message));
                             return 0;
                           });
      if (rc != 0) {
        error = "read messages";
        return rc;
      }
      for (size_t i = 0; i < msgs.size(); ++i) {
        if ((rc = fts_.remove(txn, msgs[i].second, texts[i], error)) != 0)
          return rc;
        rc = lmdb_env::del(txn, msgs_, msgs[i].first);
        if (rc == 0)
          rc = lmdb_env::del(txn, msg_by_id_, codec::be64(msgs[i].second));
        if (rc != 0 && rc != MDB_NOTFOUND) {
          error = "delete message " + std::to_string(msgs[i].second);
          return rc;
        }
      }
      std::vector<std::string> keys;
      rc = scan_prefix(txn, msg_keys_, sub_key(id, ""),
                       [&](std::string_view k, std::string_view) {
                         keys.emplace_back(k);
                         return 0;
                       });
      for (size_t i = 0; rc == 0 && i < keys.size(); ++i)
        rc = lmdb_env::del(txn, msg_keys_, keys[i]);
      if (rc != 0) {
        error = "delete idempotency keys";
        return rc;
      }
      if (!s.parent_session_id.empty()) {
        rc = lmdb_env::del(txn, children_, sub_key(s.parent_session_id, id));
        if (rc != 0 && rc != MDB_NOTFOUND) {
          error = "unlink from parent";
          return rc;
        }
      }
      rc = lmdb_env::del(txn, by_time_, time_key(s.started_at_ms, id));
      if (rc != 0 && rc != MDB_NOTFOUND) {
        error = "delete start-time entry";
        return rc;
      }
      if (has_approvals_) {
        rc = lmdb_env::del(txn, approvals_, id);
        if (rc != 0 && rc != MDB_NOTFOUND) {
          error = "delete approvals";
          return rc;
        }
      }
      if ((rc = delete_responses_of(txn, id, error)) != 0)
        return rc;
      if ((rc = run_delete_hooks(txn, id, error)) != 0)
        return rc;
      if ((rc = lmdb_env::del(txn, sessions_, id)) != 0)
        error = "delete session row";
      return rc;
    },
    "delete_session");
}

// -- approvals ----------------------------------------------------------------

store_result<std::vector<std::string>>
lmdb_session_store::do_get_approvals(const std::string& id) const {
  using result = store_result<std::vector<std::string>>;
  std::vector<std::string> keys;
  if (!has_approvals_)
    return result{keys};
  auto st = env_->read(
    [&](MDB_txn* txn, std::string&) {
      std::string_view v;
      int rc = lmdb_env::get(txn, approvals_, id, v);
      if (rc == MDB_NOTFOUND)
        return 0;
      if (rc != 0)
        return rc;
      size_t pos = 0;
      while (pos < v.size()) {
        auto nl = v.find('\n', pos);
        if (nl == std::string_view::npos)
          nl = v.size();
        if (nl > pos)
          keys.emplace_back(v.substr(pos, nl - pos));
        pos = nl + 1;
      }
      return 0;
    },
    "get_approvals");
  if (!st)
    return result::failure(st.error);
  return result{keys};
}

store_status
lmdb_session_store::do_set_approvals(const std::string& id,
                                     const std::vector<std::string>& keys) {
  if (!has_approvals_)
    return store_status::failure("set_approvals: the store is read-only");
  std::string value;
  for (auto& k : keys)
    value += k + "\n";
  return env_->write(
    [&](MDB_txn* txn, std::string&) {
      if (value.empty()) {
        int rc = lmdb_env::del(txn, approvals_, id);
        return rc == MDB_NOTFOUND ? 0 : rc;
      }
      return lmdb_env::put(txn, approvals_, id, value);
    },
    "set_approvals");
}

} // namespace mibyan
