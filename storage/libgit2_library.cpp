#include "storage/libgit2_library.hpp"

#include "base/shared_library.hpp"

#ifndef MIBYAN_LIBGIT2_SONAME
#error "MIBYAN_LIBGIT2_SONAME is set by CMakeLists.txt from libgit2's version"
#endif

namespace mibyan {

namespace {

const loaded_library<libgit2_library>& instance() {
  return load_once<libgit2_library>([](libgit2_library& l) {
#define MIBYAN_LIBGIT2_SYMBOL(name) {#name, symbol_slot(l.name)},
    auto st = load_shared_library(
      {MIBYAN_LIBGIT2_SONAME, "libgit2-1.5", "libgit2 1.1"},
      {MIBYAN_LIBGIT2_FUNCTIONS(MIBYAN_LIBGIT2_SYMBOL)});
#undef MIBYAN_LIBGIT2_SYMBOL
    // libgit2's global state: initialised once, never shut down.
    if (st.ok())
      l.git_libgit2_init();
    return st;
  });
}

} // namespace

result<const libgit2_library*> libgit2_lib() {
  return instance().get();
}

const libgit2_library& git2() {
  return instance().lib;
}

} // namespace mibyan
