#include "base/curl_library.hpp"

#include "base/shared_library.hpp"

namespace mibyan {

namespace {

struct loaded {
  curl_library lib{};
  status st;
};

loaded load() {
  loaded out;
  auto& l = out.lib;
#define MIBYAN_CURL_SYMBOL(name) {"curl_" #name, symbol_slot(l.name)},
  out.st = load_shared_library(
    {"libcurl.so.4", "libcurl4", "libcurl 7.88"},
    {MIBYAN_CURL_FUNCTIONS(MIBYAN_CURL_SYMBOL)});
#undef MIBYAN_CURL_SYMBOL
  // libcurl keeps global state: initialised once, never cleaned up.
  if (out.st.ok())
    l.global_init(CURL_GLOBAL_DEFAULT);
  return out;
}

const loaded& instance() {
  static const loaded l = load();
  return l;
}

} // namespace

result<const curl_library*> curl_lib() {
  auto& l = instance();
  if (!l.st.ok())
    return l.st;
  return &l.lib;
}

const curl_library& curl_api() {
  return instance().lib;
}

} // namespace mibyan
