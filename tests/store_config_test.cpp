// Section `storage` of the configuration (docs/configuration.md) and how
// it reaches the store: the loader's checks, the store options built from
// it (runtime/store_config.hpp), the backend registry behind
// open_session_store (storage/store_backend.hpp), and the commands that
// refuse a store configuration they cannot use (exit 2, one line).
#define BOOST_TEST_MODULE store_config
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <fstream>

#include "config/loader.hpp"
#include "runtime/runtime.hpp"
#include "runtime/store_config.hpp"
#include "storage/store_backend.hpp"
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mibyan;

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

result<options> parse(const std::string& yaml) {
  return parse_options(yaml, "c.yaml");
}

// The error of parsing `yaml` (fails the test when it parses).
std::string parse_error(const std::string& yaml) {
  auto r = parse(yaml);
  BOOST_TEST(!r.ok(), "accepted: " << yaml);
  return r.error;
}

} // namespace

BOOST_AUTO_TEST_CASE(defaults_open_the_embedded_store) {
  auto r = parse("");
  BOOST_REQUIRE(r.ok());
  BOOST_TEST(r->storage.backend == "lmdb");
  BOOST_TEST(r->storage.postgres_url.empty());
  BOOST_TEST(r->storage.postgres_pool_size == 4);
  BOOST_TEST(!r->storage.auto_migrate);
  r->home = "/home/x/.mibyan";
  auto so = store_options_from(*r);
  BOOST_REQUIRE_MESSAGE(so, so.error);
  BOOST_TEST(so->backend == "lmdb");
  BOOST_TEST(so->dir == "/home/x/.mibyan/sessions");
}

BOOST_AUTO_TEST_CASE(every_key_is_read) {
  auto r = parse("storage:\n"
                 "  backend: postgres\n"
                 "  postgres:\n"
                 "    url: postgresql://app@db.example:5433/mibyan"
                 "?sslmode=verify-full\n"
                 "    pool_size: 12\n"
                 "  auto_migrate: true\n");
  BOOST_REQUIRE_MESSAGE(r.ok(), r.error);
  BOOST_TEST(r->storage.backend == "postgres");
  BOOST_TEST(r->storage.postgres_url
             == "postgresql://app@db.example:5433/mibyan?sslmode=verify-full");
  BOOST_TEST(r->storage.postgres_pool_size == 12);
  BOOST_TEST(r->storage.auto_migrate);
  r->env_file["MIBYAN_PG_PASSWORD"] = "from-dot-env";
  auto so = store_options_from(*r);
  BOOST_REQUIRE_MESSAGE(so, so.error);
  BOOST_TEST(so->backend == "postgres");
  BOOST_TEST(so->postgres_url == r->storage.postgres_url);
  BOOST_TEST(so->postgres_password == "from-dot-env");
  BOOST_TEST(so->postgres_pool_size == 12u);
  BOOST_TEST(so->auto_migrate);
  // Leaving a key of the mapping out keeps its value.
  r = parse("storage:\n  postgres:\n    pool_size: 2\n");
  BOOST_REQUIRE_MESSAGE(r.ok(), r.error);
  BOOST_TEST(r->storage.postgres_pool_size == 2);
  BOOST_TEST(r->storage.postgres_url.empty());
}

BOOST_AUTO_TEST_CASE(wrong_values_are_clear_config_errors) {
  auto e = parse_error("storage:\n  backend: mysql\n");
  BOOST_TEST(contains(e, "c.yaml:2: storage.backend: must be one of lmdb, "
                         "postgres, got 'mysql'"), e);
  e = parse_error("storage:\n  postgres:\n    pool_size: 0\n");
  BOOST_TEST(contains(e, "storage.postgres: pool_size: must be between 1 "
                         "and 256, got 0"), e);
  e = parse_error("storage:\n  postgres:\n    pool_size: 257\n");
  BOOST_TEST(contains(e, "must be between 1 and 256, got 257"), e);
  e = parse_error("storage:\n  postgres:\n    pool_size: many\n");
  BOOST_TEST(contains(e, "pool_size: expected an integer, got 'many'"), e);
  e = parse_error("storage:\n  postgres:\n    host: db\n");
  BOOST_TEST(contains(e, "unknown key 'host' (known: url, pool_size)"), e);
  e = parse_error("storage:\n  postgres: db.example\n");
  BOOST_TEST(contains(e, "expected a mapping of url, pool_size"), e);
  e = parse_error("storage:\n  postgres:\n    url: [a, b]\n");
  BOOST_TEST(contains(e, "url: expected a string, got a list"), e);
  e = parse_error("storage:\n  postgres:\n    url: mysql://db/x\n");
  BOOST_TEST(contains(e, "expected a postgresql:// or postgres:// URI"), e);
  e = parse_error("storage:\n  postgres:\n    url: \"postgresql://a@b/c d\"\n");
  BOOST_TEST(contains(e, "must not contain spaces"), e);
  e = parse_error("storage:\n  auto_migrate: sometimes\n");
  BOOST_TEST(contains(e, "storage.auto_migrate: expected true or false"), e);
  e = parse_error("storage:\n  engine: lmdb\n");
  BOOST_TEST(contains(e, "unknown key 'storage.engine'"), e);
}

// The secret part of the URL comes from the environment or .env: a
// password written into config.yaml is refused, in the user part or as a
// parameter; a ${VAR} reference is accepted and expanded.
BOOST_AUTO_TEST_CASE(a_password_in_the_file_is_refused) {
  for (const char* url :
       {"postgresql://app:hunter2@db/mibyan",
        "postgres://app:@db/mibyan",
        "postgresql://app@db/mibyan?password=hunter2",
        "postgresql://app@db/mibyan?sslmode=require&password=${X}x",
        "postgresql://app:${PG-PASS}@db/mibyan"}) {
    auto e = parse_error(std::string{"storage:\n  postgres:\n    url: \""}
                         + url + "\"\n");
    BOOST_TEST(contains(e, "MIBYAN_PG_PASSWORD"), url << ": " << e);
    BOOST_TEST(!contains(e, "hunter2"), e);
  }
  auto r = parse("storage:\n  backend: postgres\n  postgres:\n"
                 "    url: postgresql://app:${APP_DB_PASS}@${DB_HOST}:5432/"
                 "mibyan?password=${APP_DB_PASS}\n");
  BOOST_REQUIRE_MESSAGE(r.ok(), r.error);
  r->env_file["APP_DB_PASS"] = "s3cret";
  r->env_file["DB_HOST"] = "10.0.0.7";
  auto so = store_options_from(*r);
  BOOST_REQUIRE_MESSAGE(so, so.error);
  BOOST_TEST(so->postgres_url
             == "postgresql://app:s3cret@10.0.0.7:5432/mibyan?password=s3cret");
  BOOST_TEST(so->postgres_password.empty());
}

BOOST_AUTO_TEST_CASE(the_environment_wins_over_dot_env) {
  auto r = parse("storage:\n  backend: postgres\n  postgres:\n"
                 "    url: postgresql://app@${MIBYAN_TEST_PG_HOST}/db\n");
  BOOST_REQUIRE_MESSAGE(r.ok(), r.error);
  r->env_file["MIBYAN_TEST_PG_HOST"] = "from-file";
  ::setenv("MIBYAN_TEST_PG_HOST", "from-env", 1);
  auto so = store_options_from(*r);
  ::unsetenv("MIBYAN_TEST_PG_HOST");
  BOOST_REQUIRE_MESSAGE(so, so.error);
  BOOST_TEST(so->postgres_url == "postgresql://app@from-env/db");
}

BOOST_AUTO_TEST_CASE(postgres_options_that_cannot_work_are_refused) {
  auto r = parse("storage:\n  backend: postgres\n");
  BOOST_REQUIRE(r.ok());
  auto so = store_options_from(*r);
  BOOST_TEST(!so);
  BOOST_TEST(static_cast<int>(so.code)
             == static_cast<int>(status_code::config_invalid));
  BOOST_TEST(contains(so.error, "storage.postgres.url is empty"), so.error);
  // A reference to a variable that is set nowhere.
  r = parse("storage:\n  backend: postgres\n  postgres:\n"
            "    url: postgresql://app:${MIBYAN_TEST_UNSET_VAR}@db/x\n");
  BOOST_REQUIRE(r.ok());
  so = store_options_from(*r);
  BOOST_TEST(!so);
  BOOST_TEST(contains(so.error, "${MIBYAN_TEST_UNSET_VAR}, which is not set"),
             so.error);
  // An unclosed reference.
  r = parse("storage:\n  backend: postgres\n  postgres:\n"
            "    url: postgresql://app@${HOST/x\n");
  BOOST_REQUIRE(r.ok());
  so = store_options_from(*r);
  BOOST_TEST(!so);
  BOOST_TEST(contains(so.error, "without a closing"), so.error);
  // With LMDB the PostgreSQL keys are not looked at.
  r = parse("storage:\n  backend: lmdb\n  postgres:\n"
            "    url: postgresql://app:${MIBYAN_TEST_UNSET_VAR}@db/x\n");
  BOOST_REQUIRE(r.ok());
  BOOST_TEST(store_options_from(*r).ok());
}

// The factory dispatches on the backend name; names it does not have are
// config errors that say what the build has.
BOOST_AUTO_TEST_CASE(the_factory_picks_the_registered_backend) {
  test::temp_dir tmp;
  session_store_options o;
  o.dir = tmp / "s";
  o.backend = "mysql";
  auto r = open_session_store(o);
  BOOST_TEST(!r);
  BOOST_TEST(static_cast<int>(r.code)
             == static_cast<int>(status_code::config_invalid));
  BOOST_TEST(contains(r.error, "storage.backend 'mysql' is unknown; use one "
                               "of lmdb, postgres"), r.error);
  // A build without a PostgreSQL backend (the registration removed here,
  // and put back after, when this build has one).
  auto pg = find_store_backend("postgres");
  register_store_backend("postgres", {});
  o.backend = "postgres";
  r = open_session_store(o);
  register_store_backend("postgres", pg);
  BOOST_TEST(!r);
  BOOST_TEST(static_cast<int>(r.code)
             == static_cast<int>(status_code::config_invalid));
  BOOST_TEST(contains(r.error, "this build has no PostgreSQL backend (it has "
                               "lmdb"), r.error);
  // A registered backend is what open_session_store calls.
  std::string seen;
  register_store_backend(
    "postgres", [&](const session_store_options& so)
                  -> store_result<std::unique_ptr<session_store>> {
      seen = so.postgres_url;
      return store_result<std::unique_ptr<session_store>>::failure(
        status_code::unavailable, "no server at " + so.postgres_url);
    });
  o.postgres_url = "postgresql://x@127.0.0.1:1/db";
  r = open_session_store(o);
  register_store_backend("postgres", pg);
  BOOST_TEST(seen == o.postgres_url);
  BOOST_TEST(static_cast<int>(r.code)
             == static_cast<int>(status_code::unavailable));
  BOOST_TEST(contains(r.error, "no server at"), r.error);
  // One that returns no store is an internal error, not a crash.
  register_store_backend(
    "lmdb-null", [](const session_store_options&) {
      return store_result<std::unique_ptr<session_store>>{
        std::unique_ptr<session_store>{}};
    });
  o.backend = "lmdb-null";
  r = open_session_store(o);
  register_store_backend("lmdb-null", {});
  BOOST_TEST(!r);
  BOOST_TEST(contains(r.error, "returned no store"), r.error);
  // And LMDB is always there.
  o.backend = "lmdb";
  r = open_session_store(o);
  BOOST_REQUIRE_MESSAGE(r, r.error);
  BOOST_TEST(std::string{(*r)->backend()} == "lmdb");
}

// An embedder's runtime does not start without the store its options
// name (before, every store failure only left turns failing).
BOOST_AUTO_TEST_CASE(the_runtime_refuses_a_store_configuration_it_cannot_use) {
  test::temp_dir tmp;
  options opts;
  opts.home = tmp / "home";
  opts.code_execution.prestart_kernels = 0;
  opts.storage.backend = "postgres";
  std::string err;
  auto rt = create_runtime(opts);
  BOOST_TEST(!static_cast<bool>(rt));
  BOOST_TEST(contains(rt.error, "storage.postgres.url is empty"), rt.error);
  opts.storage.backend = "lmdb";
  rt = create_runtime(opts);
  BOOST_TEST(static_cast<bool>(rt), rt.error);
}

// The commands that open the store stop with one line and exit 2 when
// the storage section cannot work, instead of running without a store.
BOOST_AUTO_TEST_CASE(commands_refuse_a_storage_section_they_cannot_use) {
  test::temp_dir home;
  test::process_options po;
  po.env["MIBYAN_HOME"] = home.path();
  auto write_config = [&](const std::string& text) {
    std::ofstream(home / "config.yaml") << text;
  };
  write_config("storage:\n  backend: postgres\n");
  for (auto args : std::vector<std::vector<std::string>>{
         {"sessions", "list"}, {"cron", "list"}, {"run", "hi"}}) {
    auto r = test::run_mibyan(args, po);
    BOOST_TEST(r.exit_code == 2, args[0] << ": " << r.exit_code << " "
                                          << r.err);
    BOOST_TEST(contains(r.err, "storage.postgres.url is empty"),
               args[0] << ": " << r.err);
  }
  // A backend this build does not have (when it has no PostgreSQL).
  if (!find_store_backend("postgres")) {
    write_config("storage:\n  backend: postgres\n  postgres:\n"
                 "    url: postgresql://app@127.0.0.1:1/db\n");
    auto r = test::run_mibyan({"sessions", "list"}, po);
    BOOST_TEST(r.exit_code == 2, r.err);
    BOOST_TEST(contains(r.err, "this build has no PostgreSQL backend"), r.err);
  }
  write_config("storage:\n  backend: sqlite\n");
  auto r = test::run_mibyan({"sessions", "list"}, po);
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(contains(r.err, "storage.backend: must be one of lmdb, postgres"),
             r.err);
  // The default still works and creates nothing it does not need.
  write_config("storage:\n  backend: lmdb\n");
  r = test::run_mibyan({"sessions", "list"}, po);
  BOOST_TEST(r.exit_code == 0, r.err);
}
