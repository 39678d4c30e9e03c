// File: storage/postgres/pq_library.hpp
//
// libpq, loaded on first use (base/shared_library.hpp) instead of linked:
// a process that never opens a PostgreSQL store (every one-shot CLI
// command, every node on LMDB) is spared loading libpq and the Kerberos,
// LDAP, SASL and TLS libraries it brings.
//
// Contract:
//   * `pq_lib()` loads the library once (thread-safe) and returns the
//     table, or fails (unavailable, with how to install libpq5). Code that
//     makes a connection calls it first and reports its failure.
//   * `pq()` is for code that holds a connection or result, which exists
//     only after `pq_lib()` succeeded; it never loads.
//   * Members have libpq's names and signatures: `pq().PQclear(r)`.
#pragma once

#include <libpq-fe.h>

#include "base/status.hpp"

namespace mibyan::pg {

/// The libpq functions the store calls, for X(name) macros.
#define MIBYAN_PQ_FUNCTIONS(X) \
  X(PQclear) X(PQcmdTuples) X(PQconnectdbParams) X(PQconninfoFree) \
  X(PQconninfoParse) X(PQdb) X(PQerrorMessage) X(PQexec) \
  X(PQexecPrepared) X(PQfinish) X(PQfreemem) X(PQgetisnull) \
  X(PQgetlength) X(PQgetvalue) X(PQhost) X(PQntuples) X(PQport) \
  X(PQprepare) X(PQresultErrorField) X(PQresultErrorMessage) \
  X(PQresultStatus) X(PQserverVersion) X(PQstatus)

struct pq_library {
#define MIBYAN_PQ_MEMBER(name) decltype(&::name) name;
  MIBYAN_PQ_FUNCTIONS(MIBYAN_PQ_MEMBER)
#undef MIBYAN_PQ_MEMBER
};

/// The loaded library, or unavailable with why it could not be loaded.
/// The pointer is never null and stays valid for the process's life.
result<const pq_library*> pq_lib();

/// The loaded library; only after `pq_lib()` returned it.
const pq_library& pq();

} // namespace mibyan::pg
