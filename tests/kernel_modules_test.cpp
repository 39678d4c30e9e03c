// The kernel's Python modules (kernels/runner_source.hpp): every file of
// kernels/ is embedded as it is, spawn_kernel writes them all into the
// staging dir, the runner finds them without the staging dir on sys.path,
// and their names never shadow a cell's own modules.
#define BOOST_TEST_MODULE kernel_modules
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <set>
#include <string>

#include <sys/stat.h>
#include <sys/wait.h>

#include "base/env_filter.hpp"
#include "kernels/kernel_process.hpp"
#include "kernels/runner_source.hpp"
#include "tests/support/kernel_harness.hpp"
#include "tests/support/paths.hpp"
#include "tests/support/temp_dir.hpp"
#include "tools/script_specs.hpp"

using namespace mibyan;
namespace fs = std::filesystem;

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

} // namespace

// A module added to kernels/ but not to MIBYAN_KERNEL_MODULES would be
// missing from every staging dir; one edited would ship stale.
BOOST_AUTO_TEST_CASE(every_kernel_python_file_is_embedded_as_it_is) {
  auto dir = test::source_dir() + "/kernels";
  std::set<std::string> on_disk;
  for (auto& e : fs::directory_iterator(dir)) {
    auto name = e.path().filename().string();
    // The stub's transport is embedded on its own (stub_transport_source).
    if (e.path().extension() == ".py" && name != "mibyan_tools_transport.py")
      on_disk.insert(name);
  }
  std::set<std::string> embedded;
  for (auto& m : kernel_modules()) {
    std::string name{m.file_name};
    BOOST_TEST(embedded.insert(name).second, name << " listed twice");
    BOOST_TEST(!m.text.empty());
    if (on_disk.count(name))
      BOOST_TEST((m.text == test::slurp(dir + "/" + name)),
                 name << " differs from its source");
  }
  BOOST_TEST(embedded == on_disk);
  BOOST_TEST(embedded.count(std::string{kernel_runner_file}) == 1u);
  BOOST_TEST(embedded.count("mibyan_checkpoint.py") == 1u);
}

// spawn_kernel writes every module beside the runner (0600), and the
// runner built from them answers a cell.
BOOST_AUTO_TEST_CASE(spawn_kernel_writes_every_module) {
  test::temp_dir cwd;
  kernel_spawn_options so;
  so.cwd = cwd.path();
  so.tools = core_script_tool_names();
  so.specs = core_script_specs();
  so.inherited_env = current_environment();
  auto spawned = spawn_kernel(so);
  BOOST_REQUIRE_MESSAGE(spawned.ok(), spawned.error);
  auto& k = *spawned;
  for (auto& m : kernel_modules()) {
    auto path = k.staging_dir + "/" + std::string{m.file_name};
    struct stat st{};
    BOOST_TEST_REQUIRE(::stat(path.c_str(), &st) == 0, path);
    BOOST_TEST((st.st_mode & 0777) == 0600u, path);
    BOOST_TEST((test::slurp(path) == m.text), path);
  }
  signal_kernel(k.pid, SIGKILL);
  int status = 0;
  ::waitpid(k.pid, &status, 0);
  close_kernel_fds(k);
  remove_staging_dir(k.staging_dir);
}

// With PYTHONSAFEPATH (Python >= 3.11) and no PYTHONPATH the staging dir
// is nowhere on sys.path: the runner's modules and the checkpoint module's
// parts are still found (exact paths).
BOOST_AUTO_TEST_CASE(modules_load_without_the_staging_dir_on_sys_path) {
  test::kernel_harness_options o;
  o.extra_env = {"PYTHONSAFEPATH=1"};
  o.remove_env = {"PYTHONPATH"};
  test::kernel_harness k(o);
  BOOST_REQUIRE_MESSAGE(k.ready.ok, k.ready.error << " " << k.ready.raw);
  BOOST_TEST(k.ready.status() == "ready");
  auto f = k.run("import sys\n"
                 "print(getattr(sys.flags, 'safe_path', True))\n"
                 "print(any(p == '" + k.dir.path() + "' for p in sys.path))\n"
                 "x = [1, 2]");
  BOOST_REQUIRE(f.ok);
  BOOST_TEST(f.status() == "ok");
  BOOST_TEST(f.out() == "True\nFalse\n", f.out());
  BOOST_REQUIRE(k.proc->send_line(
    R"({"id": "c2", "op": "checkpoint", "checkpoint": {"file": "ck.bin"}})"));
  auto c = k.proc->read_frame(k.sentinel, std::chrono::seconds(30));
  BOOST_REQUIRE(c.ok);
  BOOST_TEST(c.status() == "checkpoint");
  BOOST_TEST(c.body.find("error") == nullptr, c.body_text);
  BOOST_TEST(c.body.get_bool("changed", false));
  BOOST_TEST(fs::file_size(k.dir.path() + "/ck.bin") > 0u);
}

// The runner's modules are registered under "_mibyan_" names: a cell's own
// modules called kernel, frames, cells, ... are the cell's.
BOOST_AUTO_TEST_CASE(runner_modules_do_not_shadow_a_cells_modules) {
  test::kernel_harness k;
  BOOST_REQUIRE(k.ready.ok);
  for (auto name : {"kernel", "frames", "capture", "cells", "watchdog",
                    "checkpoint_ops", "tools_loader"})
    k.dir.write(std::string{"work/"} + name + ".py",
                std::string{"WHO = 'user "} + name + "'\n");
  auto f = k.run("import kernel, frames, capture, cells, watchdog\n"
                 "import checkpoint_ops, tools_loader\n"
                 "for m in (kernel, frames, capture, cells, watchdog,\n"
                 "          checkpoint_ops, tools_loader):\n"
                 "    print(m.WHO)\n"
                 "import sys\n"
                 "print(sorted(n for n in sys.modules\n"
                 "             if n.startswith('_mibyan_')))");
  BOOST_REQUIRE(f.ok);
  BOOST_TEST(f.status() == "ok", f.trace());
  BOOST_TEST(contains(f.out(), "user kernel\nuser frames\nuser capture\n"
                               "user cells\nuser watchdog\n"
                               "user checkpoint_ops\nuser tools_loader\n"));
  BOOST_TEST(contains(f.out(), "'_mibyan_kernel'"), f.out());
}
