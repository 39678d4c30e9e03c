#include "storage/postgres/pq_library.hpp"

#include "base/shared_library.hpp"

namespace mibyan::pg {

namespace {

struct loaded {
  pq_library lib{};
  status st;
};

const loaded& instance() {
  static const loaded l = [] {
    loaded out;
    auto& l = out.lib;
#define MIBYAN_PQ_SYMBOL(name) {#name, symbol_slot(l.name)},
    out.st = load_shared_library({"libpq.so.5", "libpq5", "libpq 15"},
                                 {MIBYAN_PQ_FUNCTIONS(MIBYAN_PQ_SYMBOL)});
#undef MIBYAN_PQ_SYMBOL
    return out;
  }();
  return l;
}

} // namespace

result<const pq_library*> pq_lib() {
  auto& l = instance();
  if (!l.st.ok())
    return l.st;
  return &l.lib;
}

const pq_library& pq() {
  return instance().lib;
}

} // namespace mibyan::pg
