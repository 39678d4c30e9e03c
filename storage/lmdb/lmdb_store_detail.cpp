// Key encodings and record access shared by the LMDB session store's
// parts (storage/lmdb/lmdb_store_detail.hpp).
#include "storage/lmdb/lmdb_store_detail.hpp"

#include <algorithm>

#include "storage/byte_codec.hpp"

namespace mibyan::store_detail {

std::string sub_key(std::string_view a, std::string_view b) {
  std::string k;
  k.reserve(a.size() + 1 + b.size());
  k.append(a.data(), a.size());
  k.push_back('\0');
  k.append(b.data(), b.size());
  return k;
}

std::string msg_key(std::string_view session, uint64_t id) {
  std::string k{session};
  k.push_back('\0');
  codec::put_be64(k, id);
  return k;
}

std::string time_key(int64_t started, std::string_view id) {
  std::string k;
  codec::put_be64(k, static_cast<uint64_t>(std::max<int64_t>(started, 0)));
  k.append(id.data(), id.size());
  return k;
}


int read_session(MDB_txn* txn, MDB_dbi dbi, const std::string& id,
                 session_info& out, std::string& error) {
  std::string_view v;
  int rc = lmdb_env::get(txn, dbi, id, v);
  if (rc == MDB_NOTFOUND) {
    error = "session '" + id + "' does not exist";
    return lmdb_env::missing_error;
  }
  if (rc != 0) {
    error = "read session '" + id + "'";
    return rc;
  }
  auto decoded = decode_session(v);
  if (!decoded) {
    error = "session '" + id + "': " + decoded.error;
    return lmdb_env::user_error;
  }
  out = std::move(*decoded);
  return 0;
}

int write_session(MDB_txn* txn, MDB_dbi dbi, const session_info& s,
                  std::string& error) {
  int rc = lmdb_env::put(txn, dbi, s.id, encode_session(s));
  if (rc != 0)
    error = "write session '" + s.id + "'";
  return rc;
}

} // namespace mibyan::store_detail
