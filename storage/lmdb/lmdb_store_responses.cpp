// The LMDB session store, part: the stored responses of the Responses API
// (storage/response_record.hpp). A response belongs to a session: it is
// written only while that session exists, and deleting the session
// deletes its responses in the same transaction (delete_session_txn calls
// delete_responses_of).
#include "storage/lmdb/lmdb_session_store.hpp"

#include "base/json.hpp"
#include "storage/byte_codec.hpp"
#include "storage/lmdb/lmdb_store_detail.hpp"

namespace mibyan {

using namespace store_detail;

namespace {

store_status no_responses(const char* what) {
  return store_status::failure(
    status_code::unavailable,
    std::string{what}
      + ": this store has no responses database (a read-only open of a "
        "store written before responses existed)");
}

// The stored record of response `id` in `dbi`, into `v`. 0, or
// lmdb_env::missing_error / an LMDB code with `error` set.
int read_response_record(MDB_txn* txn, MDB_dbi dbi, const std::string& id,
                         std::string_view& v, std::string& error) {
  int rc = lmdb_env::get(txn, dbi, id, v);
  if (rc == MDB_NOTFOUND) {
    error = "no response '" + id + "'";
    return lmdb_env::missing_error;
  }
  if (rc != 0)
    error = "read response '" + id + "'";
  return rc;
}

} // namespace

store_status lmdb_session_store::do_put_response(const stored_response& r) {
  if (!has_responses_)
    return no_responses("put_response");
  auto value = encode_response(r);
  return env_->write(
    [&](MDB_txn* txn, std::string& error) {
      session_info s;
      if (int rc = read_session(txn, sessions_, r.session_id, s, error);
          rc != 0)
        return rc;
      // A response written again under another session leaves the old
      // session's index.
      std::string_view old;
      int rc = lmdb_env::get(txn, responses_, r.id, old);
      if (rc == 0) {
        stored_response prev;
        if (decode_response(old, prev) && prev.session_id != r.session_id) {
          rc = lmdb_env::del(txn, responses_by_session_,
                             sub_key(prev.session_id, r.id));
          if (rc != 0 && rc != MDB_NOTFOUND) {
            error = "unindex the previous row";
            return rc;
          }
        }
      } else if (rc != MDB_NOTFOUND) {
        error = "read response '" + r.id + "'";
        return rc;
      }
      if ((rc = lmdb_env::put(txn, responses_, r.id, value)) != 0) {
        error = "write response '" + r.id + "'";
        return rc;
      }
      rc = lmdb_env::put(txn, responses_by_session_,
                         sub_key(r.session_id, r.id), {});
      if (rc != 0)
        error = "index response '" + r.id + "'";
      return rc;
    },
    "put_response");
}

store_result<stored_response>
lmdb_session_store::do_get_response(const std::string& id) const {
  using result = store_result<stored_response>;
  if (!has_responses_)
    return result::failure(status_code::not_found,
                           "get_response: no response '" + id + "'");
  stored_response out;
  auto st = env_->read(
    [&](MDB_txn* txn, std::string& error) {
      std::string_view v;
      int rc = read_response_record(txn, responses_, id, v, error);
      if (rc != 0)
        return rc;
      if (!decode_response(v, out)) {
        error = "response '" + id + "' is damaged or of a newer version";
        return static_cast<int>(MDB_CORRUPTED);
      }
      return 0;
    },
    "get_response");
  if (!st)
    return result{st};
  return result{std::move(out)};
}

store_status lmdb_session_store::do_delete_response(const std::string& id) {
  if (!has_responses_)
    return no_responses("delete_response");
  return env_->write(
    [&](MDB_txn* txn, std::string& error) {
      std::string_view v;
      int rc = read_response_record(txn, responses_, id, v, error);
      if (rc != 0)
        return rc;
      stored_response r;
      if (decode_response(v, r)) {
        rc = lmdb_env::del(txn, responses_by_session_,
                           sub_key(r.session_id, id));
        if (rc != 0 && rc != MDB_NOTFOUND) {
          error = "unindex response '" + id + "'";
          return rc;
        }
      }
      if ((rc = lmdb_env::del(txn, responses_, id)) != 0)
        error = "delete response '" + id + "'";
      return rc;
    },
    "delete_response");
}

int lmdb_session_store::delete_responses_of(MDB_txn* txn, const std::string& id,
                                       std::string& error) {
  if (!has_responses_)
    return 0;
  // Collected first: no deletes under a walking cursor.
  std::vector<std::string> keys;
  auto prefix = sub_key(id, "");
  int rc = scan_prefix(txn, responses_by_session_, prefix,
                       [&](std::string_view k, std::string_view) {
                         keys.emplace_back(k);
                         return 0;
                       });
  if (rc != 0) {
    error = "read the session's responses";
    return rc;
  }
  for (auto& k : keys) {
    rc = lmdb_env::del(txn, responses_, k.substr(prefix.size()));
    if (rc == 0 || rc == MDB_NOTFOUND)
      rc = lmdb_env::del(txn, responses_by_session_, k);
    if (rc != 0 && rc != MDB_NOTFOUND) {
      error = "delete the session's responses";
      return rc;
    }
  }
  return 0;
}

int lmdb_session_store::verify_responses(MDB_txn* txn,
                                    std::vector<std::string>& problems,
                                    std::string& error) const {
  if (!has_responses_)
    return 0;
  int rc = scan_prefix(
    txn, responses_, "", [&](std::string_view k, std::string_view v) {
      stored_response r;
      auto key = json::sanitize_utf8(k);
      if (!decode_response(v, r)) {
        problems.push_back("response " + key + " is undecodable");
        return 0;
      }
      if (r.id != k)
        problems.push_back("response " + key + " is stored under the "
                           "wrong key");
      std::string_view ignored;
      if (lmdb_env::get(txn, sessions_, r.session_id, ignored) != 0)
        problems.push_back("response " + key + " belongs to missing "
                           "session " + json::sanitize_utf8(r.session_id));
      if (lmdb_env::get(txn, responses_by_session_,
                        sub_key(r.session_id, r.id), ignored)
          != 0)
        problems.push_back("response " + key + " is missing from "
                           "responses_by_session");
      return 0;
    });
  if (rc != 0) {
    error = "scan responses";
    return rc;
  }
  rc = scan_prefix(
    txn, responses_by_session_, "",
    [&](std::string_view k, std::string_view) {
      auto nul = k.find('\0');
      std::string_view v;
      stored_response r;
      if (nul == std::string_view::npos
          || lmdb_env::get(txn, responses_, k.substr(nul + 1), v) != 0
          || !decode_response(v, r) || r.session_id != k.substr(0, nul))
        problems.push_back("responses_by_session entry "
                           + json::sanitize_utf8(k)
                           + " points to no response of that session");
      return 0;
    });
  if (rc != 0)
    error = "scan responses_by_session";
  return rc;
}

store_result<uint64_t>
lmdb_session_store::do_last_message_id(const std::string& session_id) const {
  using result = store_result<uint64_t>;
  uint64_t last = 0;
  auto st = env_->read(
    [&](MDB_txn* txn, std::string& error) {
      session_info s;
      if (int rc = read_session(txn, sessions_, session_id, s, error);
          rc != 0)
        return rc;
      // The first key after the session's range, then one step back.
      cursor_guard cur;
      int rc = mdb_cursor_open(txn, msgs_, &cur.c);
      if (rc != 0)
        return rc;
      auto prefix = sub_key(session_id, "");
      auto end = msg_key(session_id, ~uint64_t{0});
      MDB_val k = lmdb_env::val(end);
      MDB_val v;
      rc = mdb_cursor_get(cur.c, &k, &v, MDB_SET_RANGE);
      if (rc == 0 && lmdb_env::view(k) == end)
        ; // a message with the largest id: it is the last one
      else if (rc == 0)
        rc = mdb_cursor_get(cur.c, &k, &v, MDB_PREV);
      else if (rc == MDB_NOTFOUND)
        rc = mdb_cursor_get(cur.c, &k, &v, MDB_LAST);
      if (rc == MDB_NOTFOUND)
        return 0;
      if (rc != 0) {
        error = "find the last message";
        return rc;
      }
      auto key = lmdb_env::view(k);
      if (key.size() == prefix.size() + 8
          && key.substr(0, prefix.size()) == prefix)
        last = codec::read_be64(key.data() + prefix.size());
      return 0;
    },
    "last_message_id");
  if (!st)
    return result{st};
  return result{last};
}

} // namespace mibyan
