#include "storage/user_state_store.hpp"

#include "storage/lmdb/lmdb_session_store.hpp"
#include "storage/lmdb/lmdb_user_state.hpp"
#include "storage/postgres/pg_session_store.hpp"
#include "storage/postgres/pg_side_stores.hpp"
#include "storage/session_store.hpp"
#include "storage/store_checks.hpp"

namespace mibyan {

const char* to_string(user_state_kind k) {
  switch (k) {
  case user_state_kind::memory:
    return "memory";
  case user_state_kind::skill:
    return "skill";
  case user_state_kind::allowlist:
    return "allowlist";
  }
  return "unknown";
}

const std::vector<user_state_kind>& user_state_kinds() {
  static const std::vector<user_state_kind> all{
    user_state_kind::memory, user_state_kind::skill,
    user_state_kind::allowlist};
  return all;
}

store_status check_user_doc_name(const std::string& name, const char* what) {
  auto bad = [&](const std::string& why) {
    return store_status::failure(status_code::invalid_argument,
                                 std::string{what} + ": document name " + why);
  };
  if (name.empty())
    return bad("is empty");
  if (name.size() > user_state_store::max_name_bytes)
    return bad("is longer than "
               + std::to_string(user_state_store::max_name_bytes) + " bytes");
  if (name.front() == '/')
    return bad("'" + name + "' starts with '/'");
  for (unsigned char c : name)
    if (c < 0x20 || c == 0x7f)
      return bad("holds a control character");
  if (auto e = store_checks::check_utf8("document name", name); !e.empty())
    return bad("is not UTF-8 (" + e + ")");
  return {};
}

store_status check_user_doc_writes(const std::vector<user_doc_write>& changes,
                                   const char* what) {
  if (changes.size() > user_state_store::max_batch)
    return store_status::failure(
      status_code::invalid_argument,
      std::string{what} + ": " + std::to_string(changes.size())
        + " changes in one batch (at most "
        + std::to_string(user_state_store::max_batch) + ")");
  for (size_t i = 0; i < changes.size(); ++i) {
    auto& c = changes[i];
    if (auto st = check_user_doc_name(c.name, what); !st)
      return st;
    if (!c.erase && c.bytes.size() > user_state_store::max_doc_bytes)
      return store_status::failure(
        status_code::invalid_argument,
        std::string{what} + ": document '" + c.name + "' has "
          + std::to_string(c.bytes.size()) + " bytes (at most "
          + std::to_string(user_state_store::max_doc_bytes) + ")");
    for (size_t j = 0; j < i; ++j)
      if (changes[j].name == c.name)
        return store_status::failure(status_code::invalid_argument,
                                     std::string{what} + ": document '"
                                       + c.name
                                       + "' is changed twice in one batch");
  }
  return {};
}

store_result<std::unique_ptr<user_state_store>>
open_user_state_store(session_store& store) {
  if (auto* lmdb = dynamic_cast<lmdb_session_store*>(&store))
    return open_lmdb_user_state(*lmdb);
  if (auto* pg = dynamic_cast<pg_session_store*>(&store))
    return open_pg_user_state(*pg);
  return store_result<std::unique_ptr<user_state_store>>::failure(
    status_code::unavailable, std::string{"the "} + store.backend()
                                + " session store keeps no per-user state");
}

} // namespace mibyan
