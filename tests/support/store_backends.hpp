// File: tests/support/store_backends.hpp
//
// The store contract fixture: the session-store suites run each of their
// cases once per backend of the build (docs/testing.md, "Store backends"):
//   lmdb      always, in a temporary directory;
//   postgres  when the build registers the backend and the test harness
//             (tests/support/pg_server.hpp) is there: a fresh database of
//             one throw-away server per test executable. Where the server
//             cannot start, the postgres run of each case logs
//             "SKIPPED (postgres): <why>" and passes; under
//             MIBYAN_REQUIRE_TEST_DATA=1 it fails instead.
//
// A suite writes its cases with MIBYAN_STORE_TEST_CASE(name, fixture): the
// body is a member function of a fixture derived from store_fixture, run
// once per backend with `store` open on a new, empty store of it; every
// check inside carries the backend's name as context. Cases of LMDB-only
// behaviour (map size, full disk, page verification, schema lock) stay
// ordinary test cases on an LMDB store and say so.
//
// Thread safety: none; use from the test's main thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include "storage/session_store.hpp"
#include "tests/support/temp_dir.hpp"

namespace mibyan::test {

/// The backends each store case runs against, in order ("lmdb" first).
const std::vector<std::string>& store_backends_under_test();

/// Options of a new, empty store of `backend` (its files under `scratch`
/// for LMDB; a new database for PostgreSQL). Returns false with `why` set
/// when the backend cannot run here (its server did not start).
bool fresh_store_options(const std::string& backend,
                         const std::string& scratch,
                         session_store_options& out, std::string& why);

/// fresh_store_options() for a case that needs `backend`: false, logged as
/// skipped, when this build does not test it or it cannot run here (a
/// failure of the case under MIBYAN_REQUIRE_TEST_DATA=1).
bool backend_options_or_skip(const std::string& backend,
                             const std::string& scratch,
                             session_store_options& out);

/// What a suite's fixture derives from: one store of one backend.
struct store_fixture {
  test::temp_dir tmp;
  /// "lmdb", "postgres".
  std::string backend;
  /// How to open this fixture's store (the backend's fields set); suites
  /// copy it and change read_only, now_ms, max_message_bytes ...
  session_store_options base;
  std::unique_ptr<session_store> store;

  virtual ~store_fixture() = default;

  /// Prepares a new empty store of `backend` and calls opened(). False
  /// (the case then ends) when the backend cannot run here: logged as
  /// skipped, or a failure under MIBYAN_REQUIRE_TEST_DATA=1.
  bool start(const std::string& backend_name);

  /// Opens (or reopens) the store with `o`; fails the case on error.
  void open_with(const session_store_options& o);

  /// Called by start() once `base` is set: suites open the store here
  /// (default: open_with(base)).
  virtual void opened() { open_with(base); }

  bool is_lmdb() const { return backend == "lmdb"; }
};

} // namespace mibyan::test

/// One test case run once per backend; the body that follows is a member
/// function of a struct derived from `Fixture` (a store_fixture).
#define MIBYAN_STORE_TEST_CASE(test_name, Fixture)                         \
  struct test_name##_body : Fixture {                                      \
    void test_body();                                                      \
  };                                                                       \
  BOOST_DATA_TEST_CASE(test_name,                                          \
                       ::boost::unit_test::data::make(                     \
                         ::mibyan::test::store_backends_under_test()),     \
                       store_backend_name) {                               \
    BOOST_TEST_CONTEXT("backend " << store_backend_name) {                 \
      test_name##_body body;                                               \
      if (body.start(store_backend_name))                                  \
        body.test_body();                                                  \
    }                                                                      \
  }                                                                        \
  void test_name##_body::test_body()
