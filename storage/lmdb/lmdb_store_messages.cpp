// The LMDB session store, part: appending and loading messages.
#include "storage/lmdb/lmdb_session_store.hpp"

#include "storage/session_id.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
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

// -- messages -----------------------------------------------------------------

int lmdb_session_store::txn_cache::session(MDB_txn* txn, MDB_dbi dbi,
                                      const std::string& id,
                                      session_info*& out,
                                      std::string& error) {
  auto it = touched.find(id);
  if (it == touched.end()) {
    session_info s;
    if (int rc = read_session(txn, dbi, id, s, error); rc != 0)
      return rc;
    it = touched.emplace(id, std::move(s)).first;
  }
  out = &it->second;
  return 0;
}

int lmdb_session_store::begin_cache(MDB_txn* txn, txn_cache& c,
                               std::string& error) {
  c.touched.clear();
  c.to_index.clear();
  c.next_id = 1;
  std::string_view v;
  int rc = lmdb_env::get(txn, meta_, next_id_key, v);
  if (rc == 0 && v.size() == 8)
    c.next_id = codec::read_be64(v.data());
  else if (rc != MDB_NOTFOUND) {
    error = "read next message id";
    return rc != 0 ? rc : static_cast<int>(MDB_CORRUPTED);
  }
  c.first_id = c.next_id;
  return 0;
}

int lmdb_session_store::flush_cache(MDB_txn* txn, txn_cache& c,
                               std::string& error) {
  int rc = 0;
  if (!c.to_index.empty()
      && (rc = fts_.add_many(txn, c.to_index, error)) != 0)
    return rc;
  for (auto& entry : c.touched)
    if ((rc = write_session(txn, sessions_, entry.second, error)) != 0)
      return rc;
  if (c.next_id != c.first_id) {
    rc = lmdb_env::put(txn, meta_, next_id_key, codec::be64(c.next_id));
    if (rc != 0)
      error = "write next message id";
  }
  return rc;
}

int lmdb_session_store::append_txn(MDB_txn* txn, txn_cache& c,
                              const pending_append& p, int64_t stamp,
                              append_outcome& out, std::string& error) {
  out = append_outcome{};
  if (!p.key.empty() && p.key.front() == '_') {
    out.skipped = true;
    return 0;
  }
  // Every check comes before the first put, so a failed append leaves the
  // transaction unchanged (commit_group relies on it).
  session_info* s = nullptr;
  if (int rc = c.session(txn, sessions_, p.session_id, s, error); rc != 0)
    return rc;
  std::string idem;
  std::string_view v;
  if (!p.key.empty()) {
    idem = sub_key(p.session_id, p.key);
    int rc = lmdb_env::get(txn, msg_keys_, idem, v);
    if (rc == 0 && v.size() == 8) {
      out.id = codec::read_be64(v.data());
      out.duplicate = true;
      return 0;
    }
    if (rc != MDB_NOTFOUND) {
      error = "read idempotency key";
      return rc != 0 ? rc : static_cast<int>(MDB_CORRUPTED);
    }
  }
  stored_message sm;
  sm.id = c.next_id++;
  sm.session_id = p.session_id;
  sm.key = p.key;
  sm.message = p.message;
  if (sm.message.timestamp_ms == 0)
    sm.message.timestamp_ms = stamp;
  int rc = lmdb_env::put(txn, msgs_, msg_key(p.session_id, sm.id),
                         encode_message(sm));
  if (rc == 0)
    rc = lmdb_env::put(txn, msg_by_id_, codec::be64(sm.id), p.session_id,
                       MDB_APPEND);
  if (rc == 0 && !idem.empty())
    rc = lmdb_env::put(txn, msg_keys_, idem, codec::be64(sm.id));
  if (rc != 0) {
    error = "write message";
    return rc;
  }
  c.to_index.push_back(fts_index::document{
    sm.id, fts_role_of(p.message.role), indexed_text(p.message)});
  s->message_count += 1;
  s->tool_call_count += static_cast<int64_t>(p.message.tool_calls.size());
  out.id = sm.id;
  return 0;
}

store_result<std::vector<append_outcome>>
lmdb_session_store::do_append_batch(const std::vector<pending_append>& batch,
                                    int64_t stamp) {
  using result = store_result<std::vector<append_outcome>>;
  const char* what = "append_batch";
  std::vector<append_outcome> outcomes;
  auto st = env_->write(
    [&](MDB_txn* txn, std::string& error) {
      // Runs again from scratch if the map had to grow.
      outcomes.assign(batch.size(), append_outcome{});
      txn_cache c;
      int rc = begin_cache(txn, c, error);
      for (size_t i = 0; rc == 0 && i < batch.size(); ++i)
        rc = append_txn(txn, c, batch[i], stamp, outcomes[i], error);
      if (rc == 0)
        rc = flush_cache(txn, c, error);
      return rc;
    },
    what);
  if (!st)
    return result{st};
  return result{std::move(outcomes)};
}

store_result<std::vector<stored_message>>
lmdb_session_store::do_load_messages(const std::string& session_id) const {
  using result = store_result<std::vector<stored_message>>;
  std::vector<stored_message> out;
  auto st = env_->read(
    [&](MDB_txn* txn, std::string& error) {
      out.clear();
      session_info s;
      if (int rc = read_session(txn, sessions_, session_id, s, error);
          rc != 0)
        return rc;
      int rc = scan_prefix(txn, msgs_, sub_key(session_id, ""),
                           [&](std::string_view k, std::string_view v) {
                             if (k.size() != session_id.size() + 9)
                               return 0;
                             stored_message m;
                             if (!decode_message(v, m))
                               return static_cast<int>(MDB_CORRUPTED);
                             out.push_back(std::move(m));
                             return 0;
                           });
      if (rc != 0)
        error = "read messages";
      return rc;
    },
    "load_messages");
  if (!st)
    return result{st};
  return result{std::move(out)};
}

store_result<uint64_t> lmdb_session_store::message_count() const {
  uint64_t n = 0;
  auto st = env_->read(
    [&](MDB_txn* txn, std::string&) {
      MDB_stat ms;
      int rc = mdb_stat(txn, msg_by_id_, &ms);
      n = ms.ms_entries;
      return rc;
    },
    "message_count");
  if (!st)
    return store_result<uint64_t>{st};
  return store_result<uint64_t>{n};
}

} // namespace mibyan
