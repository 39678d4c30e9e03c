// File: base/shared_library.hpp
//
// Loading a C library on first use (dlopen) instead of linking it. A linked
// library is loaded and relocated at every process start, with all of its
// own dependencies: libcurl, libpq and libgit2 bring about 40 libraries
// (TLS, Kerberos, LDAP, SASL, SSH, PCRE) between them, which cost a
// one-shot `mibyan tool read_file` about 10 ms of loader work
// (docs/benchmarks.md, "The last full runs"). Each such library has a
// table of function pointers (base/curl_library.hpp,
// storage/postgres/pq_library.hpp, storage/libgit2_library.hpp) filled by
// `load_shared_library` the first time a caller needs it.
//
// Contract:
//   * The library is opened with RTLD_NOW | RTLD_LOCAL (its dependencies
//     stay out of the global symbol scope) and never closed: the tables'
//     pointers stay valid for the process's life.
//   * Every slot is filled, or the call fails: unavailable, naming the
//     library, why the loader refused it or which symbol is missing, and
//     how to install it. A failed load leaves the slots in an unspecified
//     state; callers keep the status and never call through the table.
//   * Not synchronised: callers load from a function-local static (C++
//     guarantees one initialisation under concurrent first calls).
#pragma once

#include <initializer_list>

#include "base/status.hpp"

namespace mibyan {

/// One function to bind: `slot` receives the address of symbol `name`.
struct library_symbol {
  const char* name;
  void** slot;
};

/// What to load and what to say when it cannot be loaded.
struct library_spec {
  /// The soname passed to dlopen ("libpq.so.5").
  const char* soname;
  /// The Debian package that holds it, for the error ("libpq5").
  const char* package;
  /// The version the table needs, for a missing symbol ("libpq 15").
  const char* needs;
};

/// Opens `spec.soname` and binds each of `symbols`; see the contract.
status load_shared_library(const library_spec& spec,
                           std::initializer_list<library_symbol> symbols);

/// The slot of function pointer member `f` of a table, for
/// `library_symbol` (POSIX guarantees that a data pointer returned by
/// dlsym can be converted to a function pointer).
template <class F>
void** symbol_slot(F& f) {
  return reinterpret_cast<void**>(&f);
}

/// A table of a library's functions and how loading it went.
template <class Table>
struct loaded_library {
  Table lib{};
  status st;
  /// The table, or the load's failure.
  result<const Table*> get() const {
    if (!st.ok())
      return st;
    return &lib;
  }
};

/// The process's one `Table`: `fill(table)` (which returns the load's
/// status) runs on the first call only, under C++'s guarantee of one
/// initialisation of a function-local static.
template <class Table, class Fill>
const loaded_library<Table>& load_once(Fill fill) {
  static const loaded_library<Table> once = [&] {
    loaded_library<Table> l;
    l.st = fill(l.lib);
    return l;
  }();
  return once;
}

} // namespace mibyan
