// The LMDB session store, part: full-text search and consistency checks.
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

// -- search -------------------------------------------------------------------

store_result<search_results>
lmdb_session_store::do_search(const search_request& req,
                              const fts_query& q) const {
  using result = store_result<search_results>;
  if (schema_version_ < 2 || !fts_.available())
    return result::failure(status_code::unavailable,
      "search: the full-text index of this store has the old format "
      "(schema version " + std::to_string(schema_version_) + ") and must be "
      "rebuilt; opening the store read-write rebuilds it (start `mibyan "
      "chat`, `mibyan run` or `mibyan serve` once)");
  fts_filter filter;
  filter.limit = req.limit;
  filter.offset = req.offset;
  for (auto& r : req.roles) // checked: no unknown role
    filter.role_mask |= 1u << static_cast<unsigned>(fts_role_of(r));
  search_results out;
  auto st = env_->read(
    [&](MDB_txn* txn, std::string& error) {
      out = search_results{};
      if (!req.session_id.empty()) {
        session_info s;
        if (int rc = read_session(txn, sessions_, req.session_id, s, error);
            rc != 0)
          return rc;
        filter.accept = [&](uint64_t id) {
          std::string_view v;
          return lmdb_env::get(txn, msg_by_id_, codec::be64(id), v) == 0
                 && v == req.session_id;
        };
      }
      fts_search_out found;
      if (int rc = fts_.search(txn, q, filter, found, error); rc != 0)
        return rc;
      out.total = found.total;
      for (auto& m : found.matches) {
        search_hit h;
        h.message_id = m.message_id;
        h.role = fts_role_name(m.role);
        h.score = m.score;
        std::string_view sid;
        int rc = lmdb_env::get(txn, msg_by_id_, codec::be64(m.message_id),
                               sid);
        std::string_view rec;
        if (rc == 0)
          rc = lmdb_env::get(txn, msgs_, msg_key(sid, m.message_id), rec);
        stored_message sm;
        if (rc == 0 && !decode_message(rec, sm))
          rc = MDB_CORRUPTED;
        if (rc != 0) {
          error = "load message " + std::to_string(m.message_id);
          return rc;
        }
        h.session_id = std::string{sid};
        auto text = indexed_text(sm.message);
        h.snippet = fts_index::snippet(text, q);
        fts_index::snippet_spans(text, q, 200, h.text, h.highlights);
        out.hits.push_back(std::move(h));
      }
      return 0;
    },
    "search");
  if (!st)
    return result{st};
  return result{std::move(out)};
}

// -- maintenance --------------------------------------------------------------

store_status
lmdb_session_store::do_verify(bool deep,
                              std::vector<std::string>& problems) const {
  return env_->read(
    [&](MDB_txn* txn, std::string& error) {
      std::unordered_map<uint64_t, fts_role> roles;
      std::map<std::string, std::pair<int64_t, int64_t>> counted;
      uint64_t max_id = 0;
      int rc = scan_prefix(
        txn, msgs_, "", [&](std::string_view k, std::string_view v) {
          stored_message m;
          if (!decode_message(v, m)) {
            problems.push_back("undecodable message record");
            return 0;
          }
          if (k != msg_key(m.session_id, m.id))
            problems.push_back("message " + std::to_string(m.id)
                               + " is stored under the wrong key");
          std::string_view sid;
          if (lmdb_env::get(txn, msg_by_id_, codec::be64(m.id), sid) != 0
              || sid != m.session_id)
            problems.push_back("message " + std::to_string(m.id)
                               + " has no matching msg_by_id entry");
          roles[m.id] = fts_role_of(m.message.role);
          max_id = std::max(max_id, m.id);
          auto& c = counted[m.session_id];
          c.first += 1;
          c.second += static_cast<int64_t>(m.message.tool_calls.size());
          if (deep) {
            std::string err;
            int r = fts_.verify_document(txn, m.id, indexed_text(m.message),
                                         problems, err);
            if (r != 0)
              return r;
          }
          return 0;
        });
      if (rc != 0) {
        error = "scan messages";
        return rc;
      }
      MDB_stat ms;
      if ((rc = mdb_stat(txn, msg_by_id_, &ms)) != 0)
        return rc;
      if (ms.ms_entries != roles.size())
        problems.push_back("msg_by_id holds " + std::to_string(ms.ms_entries)
                           + " entries for " + std::to_string(roles.size())
                           + " messages");
      std::string_view v;
      rc = lmdb_env::get(txn, meta_, next_id_key, v);
      uint64_t next_id = rc == 0 && v.size() == 8 ? codec::read_be64(v.data())
                                                  : 1;
      if (max_id >= next_id)
        problems.push_back("message id " + std::to_string(max_id)
                           + " is not below next_message_id "
                           + std::to_string(next_id));
      rc = scan_prefix(
        txn, sessions_, "", [&](std::string_view k, std::string_view val) {
          auto decoded = decode_session(val);
          if (!decoded) {
            problems.push_back("session " + std::string{k} + ": "
                               + decoded.error);
            return 0;
          }
          auto& s = *decoded;
          auto c = counted[s.id];
          counted.erase(s.id);
          if (s.message_count != c.first || s.tool_call_count != c.second)
            problems.push_back(
              "session " + s.id + " counts " + std::to_string(s.message_count)
              + " messages / " + std::to_string(s.tool_call_count)
              + " tool calls but holds " + std::to_string(c.first) + " / "
              + std::to_string(c.second));
          std::string_view tv;
          if (lmdb_env::get(txn, by_time_, time_key(s.started_at_ms, s.id),
                            tv)
              != 0)
            problems.push_back("session " + s.id
                               + " is missing from sessions_by_time");
          return 0;
        });
      if (rc != 0) {
        error = "scan sessions";
        return rc;
      }
      for (auto& entry : counted)
        problems.push_back(std::to_string(entry.second.first)
                           + " messages belong to missing session "
                           + entry.first);
      rc = scan_prefix(
        txn, msg_keys_, "", [&](std::string_view k, std::string_view val) {
          if (val.size() != 8 || roles.count(codec::read_be64(val.data())) == 0)
            problems.push_back("idempotency key " + json::sanitize_utf8(k)
                               + " points to a missing message");
          return 0;
        });
      if (rc != 0) {
        error = "scan idempotency keys";
        return rc;
      }
      if ((rc = verify_responses(txn, problems, error)) != 0)
        return rc;
      return fts_.verify(
        txn,
        [&](uint64_t id, fts_role& role) {
          auto it = roles.find(id);
          if (it == roles.end())
            return false;
          role = it->second;
          return true;
        },
        roles.size(), problems, error);
    },
    "verify");
}

} // namespace mibyan
