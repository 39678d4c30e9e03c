// File: base/curl_library.hpp
//
// libcurl, loaded on first use (dlopen of libcurl.so.4) instead of at
// program start. Linking it costs every process about 10 ms on our
// machines: libcurl brings two dozen libraries (TLS, Kerberos, LDAP, SSH,
// IDN) whose loading and symbol relocation a `mibyan tool read_file` or a
// `mibyan sessions` would pay without using any of them
// (docs/benchmarks-history.md, "Third round").
//
// Contract:
//   * `curl_lib()` loads the library once (thread-safe) and returns the
//     table, or fails (unavailable) when libcurl.so.4 or one of the
//     functions below is missing. Callers that get a failure report it
//     and do not touch libcurl.
//   * `curl_api()` is for code that already got a table from `curl_lib()`
//     (a handle exists only then); it never loads.
//   * The table's members are the libcurl functions of the same name
//     without the `curl_` prefix, with libcurl's own signatures, so
//     `curl_api().easy_setopt(h, CURLOPT_URL, url)` is the call it was.
#pragma once

#include <string>

#include <curl/curl.h>

#include "base/status.hpp"

namespace mibyan {

/// The functions of the table, for X(name) macros: libcurl's curl_NAME.
#define MIBYAN_CURL_FUNCTIONS(X) \
  X(global_init) X(free) X(easy_init) X(easy_cleanup) X(easy_setopt) \
  X(easy_getinfo) X(easy_strerror) X(slist_append) X(slist_free_all) \
  X(multi_init) X(multi_cleanup) X(multi_add_handle) X(multi_remove_handle) \
  X(multi_perform) X(multi_poll) X(multi_wakeup) X(multi_info_read) \
  X(multi_strerror) X(url) X(url_cleanup) X(url_dup) X(url_set) X(url_get) \
  X(url_strerror)

struct curl_library {
#define MIBYAN_CURL_MEMBER(name) decltype(&::curl_##name) name;
  MIBYAN_CURL_FUNCTIONS(MIBYAN_CURL_MEMBER)
#undef MIBYAN_CURL_MEMBER
};

/// The loaded library, or unavailable with why it could not be loaded.
/// The pointer is never null and stays valid for the process's life.
result<const curl_library*> curl_lib();

/// The loaded library; only after `curl_lib()` returned it.
const curl_library& curl_api();

} // namespace mibyan
