// The backends compiled into this build (storage/store_backend.hpp). A
// backend adds one registration line here: the library is static, so a
// self-registering object that nothing references would not be linked.
#include "storage/store_backend.hpp"

#include "storage/lmdb/lmdb_session_store.hpp"
#include "storage/postgres/pg_session_store.hpp"

namespace mibyan {

void register_builtin_store_backends() {
  register_store_backend(
    "lmdb",
    [](const session_store_options& opts)
      -> store_result<std::unique_ptr<session_store>> {
      auto opened = lmdb_session_store::open(opts);
      if (!opened)
        return store_result<std::unique_ptr<session_store>>::failure(
          opened.code, opened.error);
      return store_result<std::unique_ptr<session_store>>{
        std::unique_ptr<session_store>{std::move(*opened)}};
    });
  register_store_backend(
    "postgres",
    [](const session_store_options& opts)
      -> store_result<std::unique_ptr<session_store>> {
      auto opened = pg_session_store::open(opts);
      if (!opened)
        return store_result<std::unique_ptr<session_store>>::failure(
          opened.code, opened.error);
      return store_result<std::unique_ptr<session_store>>{
        std::unique_ptr<session_store>{std::move(*opened)}};
    });
}

} // namespace mibyan
