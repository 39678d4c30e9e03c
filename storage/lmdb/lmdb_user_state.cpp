#include "storage/lmdb/lmdb_user_state.hpp"

#include <chrono>

#include <lmdb.h>

#include "storage/byte_codec.hpp"
#include "storage/lmdb/lmdb_env.hpp"
#include "storage/lmdb/lmdb_session_store.hpp"
#include "storage/lmdb/lmdb_store_detail.hpp"

namespace mibyan {

namespace {

constexpr char record_version = 1;
constexpr std::string_view counter_key{"\0", 1};

std::string doc_key(user_state_kind kind, std::string_view name) {
  std::string k;
  k.reserve(1 + name.size());
  k.push_back(static_cast<char>(kind));
  k.append(name);
  return k;
}

std::string encode(uint64_t version, int64_t at, std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() + 16);
  out.push_back(record_version);
  codec::put_varint(out, version);
  codec::put_svarint(out, at);
  out.append(bytes);
  return out;
}

bool decode(std::string_view in, user_doc& d, bool with_bytes) {
  if (in.empty() || in[0] != record_version)
    return false;
  in.remove_prefix(1);
  if (!codec::get_varint(in, d.version) || !codec::get_svarint(in, d.updated_at_ms))
    return false;
  if (with_bytes)
    d.bytes = std::string{in};
  return d.version > 0;
}

class lmdb_user_state final : public user_state_store {
public:
  lmdb_user_state(lmdb_env& env, std::function<int64_t()> now)
    : env_(env), now_(std::move(now)) {}

  store_result<user_doc> get(user_state_kind kind,
                             const std::string& name) const override {
    if (auto st = check_user_doc_name(name, "read user state"); !st)
      return st;
    auto missing = [&] {
      return store_result<user_doc>::failure(
        status_code::not_found, std::string{"read user state: no "}
                                  + to_string(kind) + " document '" + name
                                  + "'");
    };
    if (!present_)
      return missing();
    user_doc d;
    d.name = name;
    bool bad = false;
    auto st = env_.read(
      [&](MDB_txn* txn, std::string& error) {
        std::string_view v;
        int rc = lmdb_env::get(txn, dbi_, doc_key(kind, name), v);
        if (rc == MDB_NOTFOUND) {
          error = std::string{"no "} + to_string(kind) + " document '" + name
                  + "'";
          return lmdb_env::missing_error;
        }
        if (rc != 0)
          return rc;
        if (!decode(v, d, true)) {
          bad = true;
          error = std::string{to_string(kind)} + " document '" + name
                  + "' has a damaged record";
          return lmdb_env::user_error;
        }
        return 0;
      },
      "read user state");
    if (bad)
      return store_result<user_doc>::failure(status_code::data_corrupt,
                                             st.error);
    if (!st)
      return st;
    return store_result<user_doc>{std::move(d)};
  }

  store_result<std::vector<user_doc>> list(user_state_kind kind,
                                           bool with_bytes) const override {
    std::vector<user_doc> out;
    if (!present_)
      return store_result<std::vector<user_doc>>{std::move(out)};
    std::string damaged;
    auto prefix = doc_key(kind, "");
    auto st = env_.read(
      [&](MDB_txn* txn, std::string& error) {
        out.clear();
        int rc = store_detail::scan_prefix(
          txn, dbi_, prefix, [&](std::string_view k, std::string_view v) {
            user_doc d;
            d.name = std::string{k.substr(1)};
            if (!decode(v, d, with_bytes)) {
              damaged = d.name;
              return lmdb_env::user_error;
            }
            out.push_back(std::move(d));
            return 0;
          });
        if (rc == lmdb_env::user_error)
          error = std::string{to_string(kind)} + " document '" + damaged
                  + "' has a damaged record";
        return rc;
      },
      "list user state");
    if (!damaged.empty())
      return store_result<std::vector<user_doc>>::failure(
        status_code::data_corrupt, st.error);
    if (!st)
      return st;
    return store_result<std::vector<user_doc>>{std::move(out)};
  }

  store_result<std::vector<uint64_t>>
  write(user_state_kind kind,
        const std::vector<user_doc_write>& changes) override {
    const char* what = "write user state";
    if (auto st = check_user_doc_writes(changes, what); !st)
      return st;
    if (!present_)
      return store_result<std::vector<uint64_t>>::failure(
        status_code::permission_denied,
        std::string{what} + ": the store is read-only");
    std::vector<uint64_t> versions;
    bool conflict = false;
    std::string conflict_msg;
    int64_t at = now_ ? now_() : 0;
    auto st = env_.write(
      [&](MDB_txn* txn, std::string& error) {
        versions.assign(changes.size(), 0);
        conflict = false;
        std::string_view cv;
        uint64_t counter = 0;
        int rc = lmdb_env::get(txn, dbi_, counter_key, cv);
        if (rc == 0 && cv.size() == 8)
          counter = codec::read_be64(cv.data());
        else if (rc != MDB_NOTFOUND && rc != 0)
          return rc;
        for (size_t i = 0; i < changes.size(); ++i) {
          auto& c = changes[i];
          auto key = doc_key(kind, c.name);
          std::string_view v;
          rc = lmdb_env::get(txn, dbi_, key, v);
          if (rc != 0 && rc != MDB_NOTFOUND)
            return rc;
          user_doc cur;
          if (rc == 0 && !decode(v, cur, false)) {
            error = std::string{to_string(kind)} + " document '" + c.name
                    + "' has a damaged record";
            return lmdb_env::user_error;
          }
          bool exists = rc == 0;
          if (c.expected != user_doc_any_version
              && !(c.erase && c.expected == 0 && !exists)
              && (exists ? cur.version != c.expected : c.expected != 0)) {
            conflict = true;
            conflict_msg = std::string{what} + ": conflict: " + std::string{to_string(kind)} + " document '"
                    + c.name + "' is "
                    + (exists ? "at version " + std::to_string(cur.version)
                              : std::string{"deleted"})
                    + ", the change expected "
                    + (c.expected == 0 ? std::string{"no document"}
                                       : "version "
                                           + std::to_string(c.expected));
            error = conflict_msg;
            return lmdb_env::user_error;
          }
          if (c.erase) {
            if (exists && (rc = lmdb_env::del(txn, dbi_, key)) != 0)
              return rc;
            continue;
          }
          versions[i] = ++counter;
          if ((rc = lmdb_env::put(txn, dbi_, key,
                                  encode(counter, at, c.bytes)))
              != 0)
            return rc;
        }
        return lmdb_env::put(txn, dbi_, counter_key, codec::be64(counter));
      },
      what);
    if (conflict)
      return store_result<std::vector<uint64_t>>::failure(
        status_code::already_exists, conflict_msg);
    if (!st)
      return st;
    return store_result<std::vector<uint64_t>>{std::move(versions)};
  }

  lmdb_env& env_;
  std::function<int64_t()> now_;
  bool present_ = false;
  MDB_dbi dbi_ = 0;
};

int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

} // namespace

store_result<std::unique_ptr<user_state_store>>
open_lmdb_user_state(lmdb_session_store& store) {
  auto& env = store.env();
  auto s = std::make_unique<lmdb_user_state>(env, wall_ms);
  auto* p = s.get();
  MDB_txn* txn = nullptr;
  if (mdb_txn_begin(env.raw(), nullptr, MDB_RDONLY, &txn) == 0) {
    if (mdb_dbi_open(txn, "user_state", 0, &p->dbi_) == 0
        && mdb_txn_commit(txn) == 0) {
      p->present_ = true;
      return store_result<std::unique_ptr<user_state_store>>{std::move(s)};
    }
    mdb_txn_abort(txn);
  }
  unsigned create = env.read_only() ? 0 : MDB_CREATE;
  auto st = env.setup(
    [&](MDB_txn* t, std::string& error) {
      int rc = mdb_dbi_open(t, "user_state", create, &p->dbi_);
      if (rc == MDB_NOTFOUND && create == 0)
        return 0; // read-only, written before the database existed
      if (rc != 0) {
        error = "open the user_state database";
        return rc;
      }
      p->present_ = true;
      return 0;
    },
    "open user state");
  if (!st)
    return st;
  return store_result<std::unique_ptr<user_state_store>>{std::move(s)};
}

} // namespace mibyan
