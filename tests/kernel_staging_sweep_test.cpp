// Issue 31, item 17: kernel staging dirs (/tmp/mibyan_kernel_*) were left
// behind after a kill -9 of the host. They are now named after the host
// (pid and start time) and a runtime sweeps the stale ones at start-up:
// the host is dead, or its pid now belongs to a process that started at
// another time. Dirs of live hosts stay.
#define BOOST_TEST_MODULE kernel_staging_sweep
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <filesystem>
#include <string>

#include <sys/wait.h>
#include <unistd.h>

#include "kernels/staging_dirs.hpp"
#include "mibyan/runtime.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mibyan;
namespace fs = std::filesystem;

namespace {

// The pid of a process that has exited and been reaped.
pid_t dead_pid() {
  pid_t pid = ::fork();
  if (pid == 0)
    ::_exit(0);
  int st = 0;
  ::waitpid(pid, &st, 0);
  return pid;
}

std::string staging_name(pid_t pid, uint64_t start, const char* rand) {
  return "mibyan_kernel_" + std::to_string(pid) + "_" + std::to_string(start)
         + "_" + rand;
}

// Sets TMPDIR for the test's lifetime.
struct tmpdir_override {
  std::string saved;
  bool had = false;
  explicit tmpdir_override(const std::string& dir) {
    if (const char* v = std::getenv("TMPDIR")) {
      saved = v;
      had = true;
    }
    ::setenv("TMPDIR", dir.c_str(), 1);
  }
  ~tmpdir_override() {
    if (had)
      ::setenv("TMPDIR", saved.c_str(), 1);
    else
      ::unsetenv("TMPDIR");
  }
};

} // namespace

BOOST_AUTO_TEST_CASE(staging_dirs_are_named_after_their_host) {
  auto self = process_start_time(::getpid());
  BOOST_TEST(self > 0u);
  auto t = staging_dir_template();
  BOOST_TEST(t == staging_base() + "/" + staging_name(::getpid(), self,
                                                       "XXXXXX"));
  BOOST_TEST(process_start_time(dead_pid()) == 0u);
}

BOOST_AUTO_TEST_CASE(stale_staging_dirs_are_swept_at_runtime_start) {
  test::temp_dir tmp;
  test::temp_dir home;
  auto self = process_start_time(::getpid());
  auto dead = staging_name(dead_pid(), 12345, "aB3dE9");
  auto reused = staging_name(::getpid(), self + 1, "Zz9Yy8"); // pid reused
  auto live = staging_name(::getpid(), self, "Qq1Ww2");
  auto parent = staging_name(::getppid(), process_start_time(::getppid()),
                             "Pp7Oo6");
  for (auto& d : {dead, reused, live, parent}) {
    tmp.write(d + "/mibyan_tools.py", "# stub\n");
    tmp.write(d + "/mibyan_kernel_runner.py", "# runner\n");
  }
  tmp.write("mibyan_kernel_Ab12Cd/keep.txt", "an older version's name\n");
  tmp.write("other_dir/keep.txt", "not a staging dir\n");
  auto link = staging_name(dead_pid(), 1, "Ll0Kk9");
  fs::create_symlink(tmp / "other_dir", tmp / link);
  {
    tmpdir_override guard{tmp.path()};
    runtime_config cfg;
    cfg.home = home.path();
    std::string err;
    auto made = runtime::create(cfg);
    BOOST_REQUIRE_MESSAGE(made, made.error);
    auto rt = std::move(*made);
  }
  BOOST_TEST(!fs::exists(tmp / dead));
  BOOST_TEST(!fs::exists(tmp / reused));
  BOOST_TEST(fs::exists(tmp / (live + "/mibyan_tools.py")));
  BOOST_TEST(fs::exists(tmp / (parent + "/mibyan_tools.py")));
  BOOST_TEST(fs::exists(tmp / "mibyan_kernel_Ab12Cd/keep.txt"));
  BOOST_TEST(fs::exists(tmp / "other_dir/keep.txt"));
  BOOST_TEST(fs::is_symlink(tmp / link));
}

BOOST_AUTO_TEST_CASE(sweep_leaves_symlinks_and_other_forms) {
  test::temp_dir tmp;
  tmp.write("target/precious.txt", "x\n");
  auto link = staging_name(dead_pid(), 7, "Sy1mL2");
  fs::create_symlink(tmp / "target", tmp / link);
  BOOST_TEST(sweep_stale_staging_dirs(tmp.path()) == 0u);
  BOOST_TEST(fs::is_symlink(tmp / link));
  BOOST_TEST(fs::exists(tmp / "target/precious.txt"));
  tmp.write(staging_name(dead_pid(), 7, "Rm0Me1") + "/f", "x");
  BOOST_TEST(sweep_stale_staging_dirs(tmp.path()) == 1u);
}
