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

struct curl_library {
  decltype(&::curl_global_init) global_init;
  decltype(&::curl_free) free;
  decltype(&::curl_easy_init) easy_init;
  decltype(&::curl_easy_cleanup) easy_cleanup;
  decltype(&::curl_easy_setopt) easy_setopt;
  decltype(&::curl_easy_getinfo) easy_getinfo;
  decltype(&::curl_easy_strerror) easy_strerror;
  decltype(&::curl_slist_append) slist_append;
  decltype(&::curl_slist_free_all) slist_free_all;
  decltype(&::curl_multi_init) multi_init;
  decltype(&::curl_multi_cleanup) multi_cleanup;
  decltype(&::curl_multi_add_handle) multi_add_handle;
  decltype(&::curl_multi_remove_handle) multi_remove_handle;
  decltype(&::curl_multi_perform) multi_perform;
  decltype(&::curl_multi_poll) multi_poll;
  decltype(&::curl_multi_wakeup) multi_wakeup;
  decltype(&::curl_multi_info_read) multi_info_read;
  decltype(&::curl_multi_strerror) multi_strerror;
  decltype(&::curl_url) url;
  decltype(&::curl_url_cleanup) url_cleanup;
  decltype(&::curl_url_dup) url_dup;
  decltype(&::curl_url_set) url_set;
  decltype(&::curl_url_get) url_get;
  decltype(&::curl_url_strerror) url_strerror;
};

/// The loaded library, or unavailable with why it could not be loaded.
/// The pointer is never null and stays valid for the process's life.
result<const curl_library*> curl_lib();

/// The loaded library; only after `curl_lib()` returned it.
const curl_library& curl_api();

} // namespace mibyan
