// File: storage/lmdb/lmdb_store_detail.hpp
//
// Internal to the LMDB session store's .cpp files (not for other
// callers): key encodings and record access shared by its parts.
// Functions taking an MDB_txn follow lmdb_env::txn_fn's convention: 0 or
// an LMDB code / lmdb_env::user_error / lmdb_env::missing_error, with
// `error` naming the step.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <lmdb.h>

#include "messages/chat.hpp"
#include "storage/lmdb/lmdb_env.hpp"
#include "storage/session_record.hpp"
#include "storage/store_checks.hpp"

namespace mibyan::store_detail {

// The backend-neutral checks (storage/store_checks.hpp).
using namespace mibyan::store_checks;

constexpr const char* version_key = "schema_version";
constexpr const char* next_id_key = "next_message_id";

/// a \0 b
std::string sub_key(std::string_view a, std::string_view b);
/// session \0 be64(id)
std::string msg_key(std::string_view session, uint64_t id);
/// be64(started) id
std::string time_key(int64_t started, std::string_view id);

int read_session(MDB_txn* txn, MDB_dbi dbi, const std::string& id,
                 session_info& out, std::string& error);
int write_session(MDB_txn* txn, MDB_dbi dbi, const session_info& s,
                  std::string& error);

struct cursor_guard {
  MDB_cursor* c = nullptr;
  ~cursor_guard() {
    if (c != nullptr)
      mdb_cursor_close(c);
  }
};

// Visits every entry whose key starts with `prefix`; `fn(key, value)`
// returns 0 to go on, anything else stops the walk with that code.
template <class F>
int scan_prefix(MDB_txn* txn, MDB_dbi dbi, std::string_view prefix, F&& fn) {
  cursor_guard cur;
  int rc = mdb_cursor_open(txn, dbi, &cur.c);
  if (rc != 0)
    return rc;
  MDB_val k = lmdb_env::val(prefix);
  MDB_val v;
  for (rc = mdb_cursor_get(cur.c, &k, &v,
                           prefix.empty() ? MDB_FIRST : MDB_SET_RANGE);
       rc == 0; rc = mdb_cursor_get(cur.c, &k, &v, MDB_NEXT)) {
    auto key = lmdb_env::view(k);
    if (key.substr(0, prefix.size()) != prefix)
      return 0;
    if (int r = fn(key, lmdb_env::view(v)); r != 0)
      return r;
  }
  return rc == MDB_NOTFOUND ? 0 : rc;
}

} // namespace mibyan::store_detail
