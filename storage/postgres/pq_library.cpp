#include "storage/postgres/pq_library.hpp"

#include "base/shared_library.hpp"

namespace mibyan::pg {

namespace {

const loaded_library<pq_library>& instance() {
  return load_once<pq_library>([](pq_library& l) {
#define MIBYAN_PQ_SYMBOL(name) {#name, symbol_slot(l.name)},
    return load_shared_library({"libpq.so.5", "libpq5", "libpq 15"},
                               {MIBYAN_PQ_FUNCTIONS(MIBYAN_PQ_SYMBOL)});
#undef MIBYAN_PQ_SYMBOL
  });
}

} // namespace

result<const pq_library*> pq_lib() {
  return instance().get();
}

const pq_library& pq() {
  return instance().lib;
}

} // namespace mibyan::pg
