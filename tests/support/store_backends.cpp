// The store contract fixture (tests/support/store_backends.hpp).
#include "tests/support/store_backends.hpp"

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <stdexcept>

#include "storage/store_backend.hpp"

#include "tests/support/pg_server.hpp"

namespace mibyan::test {

namespace {

bool require_test_data() {
  const char* v = std::getenv("MIBYAN_REQUIRE_TEST_DATA");
  return v != nullptr && std::string{v} == "1";
}

// The executable's one throw-away server, started on first use; null with
// the reason kept when it cannot start (tried once).
pg_server* shared_server(std::string& why) {
  static std::string failure;
  static std::unique_ptr<pg_server> server = [] {
    std::string w;
    auto s = pg_server::start(w);
    if (!s)
      failure = w.empty() ? std::string{"the server did not start"} : w;
    return s;
  }();
  why = failure;
  return server.get();
}

} // namespace

const std::vector<std::string>& store_backends_under_test() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out{"lmdb"};
    if (find_store_backend("postgres"))
      out.push_back("postgres");
    return out;
  }();
  return names;
}

bool fresh_store_options(const std::string& backend,
                         const std::string& scratch,
                         session_store_options& out, std::string& why) {
  out = session_store_options{};
  out.backend = backend;
  if (backend == "lmdb") {
    out.dir = scratch;
    return true;
  }
  if (backend == "postgres") {
    auto* server = shared_server(why);
    if (server == nullptr)
      return false;
    try {
      out.postgres_url = server->url(server->fresh_database("store"));
    } catch (const std::exception& e) {
      why = std::string{"cannot create a database: "} + e.what();
      return false;
    }
    out.auto_migrate = true;
    out.postgres_pool_size = 4;
    return true;
  }
  why = "no test set-up for backend '" + backend + "'";
  return false;
}

bool backend_options_or_skip(const std::string& backend,
                             const std::string& scratch,
                             session_store_options& out) {
  auto& listed = store_backends_under_test();
  if (std::find(listed.begin(), listed.end(), backend) == listed.end()) {
    BOOST_TEST_MESSAGE("SKIPPED (" << backend << "): not in this build");
    return false;
  }
  std::string why;
  if (!fresh_store_options(backend, scratch, out, why)) {
    if (require_test_data()) {
      BOOST_FAIL("backend " << backend << " cannot run: " << why
                            << " (MIBYAN_REQUIRE_TEST_DATA=1)");
    }
    std::cerr << "SKIPPED (" << backend << "): " << why << "\n";
    BOOST_TEST_MESSAGE("SKIPPED (" << backend << "): " << why);
    return false;
  }
  return true;
}

bool store_fixture::start(const std::string& backend_name) {
  backend = backend_name;
  if (!backend_options_or_skip(backend, tmp / "store", base))
    return false;
  opened();
  return true;
}

void store_fixture::open_with(const session_store_options& o) {
  store.reset();
  auto r = open_session_store(o);
  BOOST_REQUIRE_MESSAGE(r.ok(), "open " << o.backend << " store: " << r.error);
  store = std::move(*r);
}

} // namespace mibyan::test
