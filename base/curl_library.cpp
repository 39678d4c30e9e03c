#include "base/curl_library.hpp"

#include "base/shared_library.hpp"

namespace mibyan {

namespace {

const loaded_library<curl_library>& instance() {
  return load_once<curl_library>([](curl_library& l) {
#define MIBYAN_CURL_SYMBOL(name) {"curl_" #name, symbol_slot(l.name)},
    auto st = load_shared_library({"libcurl.so.4", "libcurl4", "libcurl 7.88"},
                                  {MIBYAN_CURL_FUNCTIONS(MIBYAN_CURL_SYMBOL)});
#undef MIBYAN_CURL_SYMBOL
    // libcurl keeps global state: initialised once, never cleaned up.
    if (st.ok())
      l.global_init(CURL_GLOBAL_DEFAULT);
    return st;
  });
}

} // namespace

result<const curl_library*> curl_lib() {
  return instance().get();
}

const curl_library& curl_api() {
  return instance().lib;
}

} // namespace mibyan
