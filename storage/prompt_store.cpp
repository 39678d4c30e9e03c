#include "storage/prompt_store.hpp"

#include "storage/lmdb/lmdb_prompt_store.hpp"
#include "storage/lmdb/lmdb_session_store.hpp"
#include "storage/postgres/pg_session_store.hpp"
#include "storage/postgres/pg_side_stores.hpp"
#include "storage/session_store.hpp"

namespace mibyan {

store_result<std::unique_ptr<prompt_store>>
open_prompt_store(session_store& store) {
  if (auto* lmdb = dynamic_cast<lmdb_session_store*>(&store))
    return open_lmdb_prompt_store(*lmdb);
  if (auto* pg = dynamic_cast<pg_session_store*>(&store))
    return open_pg_prompt_store(*pg);
  return store_result<std::unique_ptr<prompt_store>>::failure(
    status_code::unavailable,
    std::string{"the "} + store.backend()
      + " session store keeps no system prompts in this build");
}

} // namespace mibyan
