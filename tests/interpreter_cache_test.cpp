// Lazy, cached interpreter resolution (kernels/interpreter_cache.hpp,
// docs/execute_code.md "Interpreter resolution"): a wrapper script on PATH
// (like a pyenv shim) runs once per fingerprint, a changed PYENV_VERSION,
// pyenv version file or VIRTUAL_ENV resolves again, and a one-shot
// `mibyan tool read_file` never runs it (no resolution, no pre-started
// kernel) and never loads libcurl, libpq or libgit2.
#define BOOST_TEST_MODULE interpreter_cache
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <sys/stat.h>
#include <unistd.h>

#include "kernels/interpreter_cache.hpp"
#include "kernels/kernel_process.hpp"
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mibyan;
namespace fs = std::filesystem;

namespace {

// The real interpreter behind python3 on PATH.
const std::string& real_python() {
  static const std::string path = resolve_interpreter("python3");
  return path;
}

int count_lines(const std::string& path) {
  std::ifstream in(path);
  int n = 0;
  std::string line;
  while (std::getline(in, line))
    ++n;
  return n;
}

// A temp dir with bin/python3: a bash wrapper that logs each run to
// runs.log and execs the real interpreter; PATH gets bin/ first while the
// fixture lives.
struct shim_fixture {
  test::temp_dir dir;
  test::temp_dir home;
  test::temp_dir work;
  std::string old_path;
  std::string log;

  shim_fixture() {
    BOOST_REQUIRE(!real_python().empty());
    fs::create_directories(dir / "bin");
    log = dir / "runs.log";
    auto shim = dir / "bin/python3";
    std::ofstream(shim) << "#!/bin/bash\necho run >> '" << log
                        << "'\nexec '" << real_python() << "' \"$@\"\n";
    ::chmod(shim.c_str(), 0755);
    old_path = std::getenv("PATH") ? std::getenv("PATH") : "";
    ::setenv("PATH", (dir / "bin:" + old_path).c_str(), 1);
    ::unsetenv("PYENV_VERSION");
    ::unsetenv("VIRTUAL_ENV");
    ::unsetenv("CONDA_PREFIX");
  }
  ~shim_fixture() {
    ::setenv("PATH", old_path.c_str(), 1);
    ::unsetenv("PYENV_VERSION");
    ::unsetenv("VIRTUAL_ENV");
  }

  std::string resolve(bool* cached) {
    return resolve_interpreter_cached("python3", home.path(), work.path(),
                                      cached);
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(interpreter_cache, shim_fixture)

BOOST_AUTO_TEST_CASE(shim_runs_once_until_the_selected_version_changes) {
  bool cached = true;
  BOOST_TEST(resolve(&cached) == real_python());
  BOOST_TEST(!cached);
  BOOST_TEST(count_lines(log) == 1);
  // Same fingerprint (also in a new process: the cache is a file).
  BOOST_TEST(resolve(&cached) == real_python());
  BOOST_TEST(cached);
  BOOST_TEST(count_lines(log) == 1);
  // PYENV_VERSION selects another version: resolved again.
  ::setenv("PYENV_VERSION", "3.99.0", 1);
  resolve(&cached);
  BOOST_TEST(!cached);
  BOOST_TEST(count_lines(log) == 2);
  resolve(&cached);
  BOOST_TEST(cached);
  ::unsetenv("PYENV_VERSION");
  // A pyenv version file in a parent of the working directory.
  std::ofstream(work / ".python-version") << "3.98.0\n";
  resolve(&cached);
  BOOST_TEST(!cached);
  BOOST_TEST(count_lines(log) == 3);
  std::ofstream(work / ".python-version") << "3.97.0\n";
  resolve(&cached);
  BOOST_TEST(!cached);
  // An activated venv.
  ::setenv("VIRTUAL_ENV", (dir / "venv").c_str(), 1);
  resolve(&cached);
  BOOST_TEST(!cached);
  BOOST_TEST(count_lines(log) == 5);
}

BOOST_AUTO_TEST_CASE(project_interpreter_is_the_active_venv) {
  auto venv = dir / "venv";
  fs::create_directories(venv + "/bin");
  fs::create_symlink(real_python(), venv + "/bin/python3");
  ::setenv("VIRTUAL_ENV", venv.c_str(), 1);
  BOOST_TEST(resolve_project_interpreter("python3", home.path(), work.path())
             == venv + "/bin/python3");
  // A venv without a usable interpreter falls back to the default.
  ::setenv("VIRTUAL_ENV", (dir / "no-venv").c_str(), 1);
  BOOST_TEST(resolve_project_interpreter("python3", home.path(), work.path())
             == real_python());
}

BOOST_AUTO_TEST_CASE(one_shot_read_file_neither_resolves_nor_prestarts) {
  std::ofstream(work / "a.txt") << "hello\n";
  test::process_options po;
  po.env["MIBYAN_HOME"] = home.path();
  po.env["PATH"] = std::getenv("PATH");
  auto r = test::run_mibyan({"tool", "read_file",
                             R"({"path":")" + (work / "a.txt") + R"("})"},
                            po);
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(r.out.find("hello") != std::string::npos, r.out);
  // The shim never ran: no interpreter resolution, no kernel.
  BOOST_TEST(count_lines(log) == 0);
  BOOST_TEST(!fs::exists(home / "cache/interpreter.json"));
}

// libcurl, libpq and libgit2 are loaded on first use
// (base/shared_library.hpp): the dynamic loader's own trace
// (LD_DEBUG=files) shows whether the process opened them.
BOOST_AUTO_TEST_CASE(curl_pq_and_git_are_loaded_only_when_used) {
  std::ofstream(work / "a.txt") << "hello\n";
  test::process_options po;
  po.env["MIBYAN_HOME"] = home.path();
  po.env["LD_DEBUG"] = "files";
  auto loads = [](const test::process_result& r, const char* lib) {
    return r.err.find(std::string{"file="} + lib) != std::string::npos;
  };
  auto r = test::run_mibyan({"tool", "read_file",
                             R"({"path":")" + (work / "a.txt") + R"("})"},
                            po);
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(loads(r, "libsimdjson"), "LD_DEBUG=files traced nothing");
  BOOST_TEST(!loads(r, "libcurl"));
  BOOST_TEST(!loads(r, "libpq"));
  BOOST_TEST(!loads(r, "libgit2"));
  // A URL is parsed by libcurl: now it is loaded.
  r = test::run_mibyan({"tool", "web_extract",
                        R"({"urls":["http://127.0.0.1:9/"]})"}, po);
  BOOST_TEST(loads(r, "libcurl"));
  BOOST_TEST(!loads(r, "libpq"));
  // The checkpoint store is opened: libgit2.
  r = test::run_mibyan({"checkpoints", "list", "--project", work.path()}, po);
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(loads(r, "libgit2"));
  BOOST_TEST(!loads(r, "libpq"));
  // A PostgreSQL store is opened (nothing listens on port 9): libpq, and a
  // clear refusal rather than a crash.
  r = test::run_mibyan({"store", "migrate", "--url",
                        "postgresql://127.0.0.1:9/none?connect_timeout=2"},
                       po);
  BOOST_TEST(loads(r, "libpq"));
  BOOST_TEST(r.exit_code != 0);
  BOOST_TEST(r.err.find("cannot connect to PostgreSQL") != std::string::npos,
             r.err);
}

BOOST_AUTO_TEST_CASE(execute_code_resolves_lazily_through_the_cache) {
  test::process_options po;
  po.env["MIBYAN_HOME"] = home.path();
  po.env["PATH"] = std::getenv("PATH");
  po.cwd = work.path();
  // Scripts run without a human here (docs/approvals.md).
  std::ofstream(home / "config.yaml")
    << "approvals:\n  unattended_mode: approve\n";
  auto run = [&] {
    return test::run_mibyan({"tool", "execute_code",
                             R"j({"code":"import sys; print(sys.executable)"})j"},
                            po);
  };
  auto r = run();
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(r.out.find(real_python()) != std::string::npos, r.out);
  BOOST_TEST(count_lines(log) == 1); // resolved once, kernel runs the real one
  r = run();
  BOOST_TEST(r.out.find(real_python()) != std::string::npos, r.out);
  BOOST_TEST(count_lines(log) == 1); // from the cache
  po.env["PYENV_VERSION"] = "3.96.0";
  r = run();
  BOOST_TEST(count_lines(log) == 2); // the selected version changed
}

BOOST_AUTO_TEST_SUITE_END()
