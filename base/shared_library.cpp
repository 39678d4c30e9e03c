#include "base/shared_library.hpp"

#include <dlfcn.h>

#include <string>

namespace mibyan {

status load_shared_library(const library_spec& spec,
                           std::initializer_list<library_symbol> symbols) {
  dlerror();
  void* h = ::dlopen(spec.soname, RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    const char* why = dlerror();
    return status::failure(status_code::unavailable,
                           std::string{"cannot load "} + spec.soname + ": "
                             + (why ? why : "unknown error")
                             + "; install it with: apt-get install "
                             + spec.package);
  }
  for (const auto& s : symbols) {
    dlerror();
    void* sym = ::dlsym(h, s.name);
    if (sym == nullptr)
      return status::failure(status_code::unavailable,
                             std::string{spec.soname} + " has no " + s.name
                               + " (" + spec.needs + " or newer is needed)");
    *s.slot = sym;
  }
  return {};
}

} // namespace mibyan
