#include "storage/libgit2_library.hpp"

#include "base/shared_library.hpp"

#ifndef MIBYAN_LIBGIT2_SONAME
#error "MIBYAN_LIBGIT2_SONAME is set by CMakeLists.txt from libgit2's version"
#endif

namespace mibyan {

namespace {

struct loaded {
  libgit2_library lib{};
  status st;
};

const loaded& instance() {
  static const loaded l = [] {
    loaded out;
    auto& l = out.lib;
#define MIBYAN_LIBGIT2_SYMBOL(name) {#name, symbol_slot(l.name)},
    out.st = load_shared_library(
      {MIBYAN_LIBGIT2_SONAME, "libgit2-1.5", "libgit2 1.1"},
      {MIBYAN_LIBGIT2_FUNCTIONS(MIBYAN_LIBGIT2_SYMBOL)});
#undef MIBYAN_LIBGIT2_SYMBOL
    // libgit2's global state: initialised once, never shut down.
    if (out.st.ok())
      l.git_libgit2_init();
    return out;
  }();
  return l;
}

} // namespace

result<const libgit2_library*> libgit2_lib() {
  auto& l = instance();
  if (!l.st.ok())
    return l.st;
  return &l.lib;
}

const libgit2_library& git2() {
  return instance().lib;
}

} // namespace mibyan
