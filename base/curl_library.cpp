#include "base/curl_library.hpp"

#include <dlfcn.h>

namespace mibyan {

namespace {

struct loaded {
  curl_library lib{};
  bool ok = false;
  std::string error;
};

template <class F>
bool bind(void* handle, const char* name, F& slot, std::string& error) {
  dlerror();
  auto* sym = ::dlsym(handle, name);
  if (sym == nullptr) {
    error = std::string{"libcurl.so.4 has no "} + name
            + " (libcurl 7.88 or newer is needed)";
    return false;
  }
  slot = reinterpret_cast<F>(sym);
  return true;
}

loaded load() {
  loaded out;
  // RTLD_LOCAL: libcurl's dependencies stay out of the global symbol
  // scope. The handle is never closed (libcurl keeps global state).
  auto* h = ::dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    const char* why = dlerror();
    out.error = std::string{"cannot load libcurl (libcurl.so.4): "}
                + (why ? why : "unknown error")
                + "; install it with: apt-get install libcurl4";
    return out;
  }
  auto& l = out.lib;
  auto& e = out.error;
  out.ok = bind(h, "curl_global_init", l.global_init, e)
           && bind(h, "curl_free", l.free, e)
           && bind(h, "curl_easy_init", l.easy_init, e)
           && bind(h, "curl_easy_cleanup", l.easy_cleanup, e)
           && bind(h, "curl_easy_setopt", l.easy_setopt, e)
           && bind(h, "curl_easy_getinfo", l.easy_getinfo, e)
           && bind(h, "curl_easy_strerror", l.easy_strerror, e)
           && bind(h, "curl_slist_append", l.slist_append, e)
           && bind(h, "curl_slist_free_all", l.slist_free_all, e)
           && bind(h, "curl_multi_init", l.multi_init, e)
           && bind(h, "curl_multi_cleanup", l.multi_cleanup, e)
           && bind(h, "curl_multi_add_handle", l.multi_add_handle, e)
           && bind(h, "curl_multi_remove_handle", l.multi_remove_handle, e)
           && bind(h, "curl_multi_perform", l.multi_perform, e)
           && bind(h, "curl_multi_poll", l.multi_poll, e)
           && bind(h, "curl_multi_wakeup", l.multi_wakeup, e)
           && bind(h, "curl_multi_info_read", l.multi_info_read, e)
           && bind(h, "curl_multi_strerror", l.multi_strerror, e)
           && bind(h, "curl_url", l.url, e)
           && bind(h, "curl_url_cleanup", l.url_cleanup, e)
           && bind(h, "curl_url_dup", l.url_dup, e)
           && bind(h, "curl_url_set", l.url_set, e)
           && bind(h, "curl_url_get", l.url_get, e)
           && bind(h, "curl_url_strerror", l.url_strerror, e);
  if (out.ok)
    out.lib.global_init(CURL_GLOBAL_DEFAULT);
  return out;
}

const loaded& instance() {
  static const loaded l = load();
  return l;
}

} // namespace

result<const curl_library*> curl_lib() {
  auto& l = instance();
  if (!l.ok)
    return status::failure(status_code::unavailable, l.error);
  return &l.lib;
}

const curl_library& curl_api() {
  return instance().lib;
}

} // namespace mibyan
