#include "tests/support/kernel_harness.hpp"

#include <algorithm>
#include <cstdlib>

#include "kernels/env_scrub.hpp"
#include "kernels/runner_source.hpp"
#include "kernels/stub_generator.hpp"
#include "tools/script_specs.hpp"

namespace mibyan::test {

kernel_harness::kernel_harness(kernel_harness_options opts)
  : sentinel(make_kernel_sentinel()) {
  // The runner and its modules, as spawn_kernel writes them.
  std::string runner;
  for (auto& m : kernel_modules()) {
    auto path = dir.write(std::string{m.file_name}, std::string{m.text});
    if (m.file_name == kernel_runner_file)
      runner = path;
  }
  stub_path = dir.write("mibyan_tools.py", generate_stub(opts.tools, core_script_specs()));
  dir.write("work/.keep", "");
  env_scrub_options eo;
  eo.staging_dir = dir.path();
  eo.rpc_socket = opts.rpc_socket;
  eo.rpc_token = opts.rpc_token;
  eo.rpc_timeout = opts.rpc_timeout;
  eo.sentinel_fd = runner_sentinel_fd;
  eo.stub_path = stub_path;
  eo.watchdog_fd = opts.watchdog ? runner_watchdog_fd : -1;
  env = build_kernel_env(current_environment(), eo).env;
  for (auto& e : opts.extra_env)
    env.push_back(e);
  for (auto& name : opts.remove_env)
    env.erase(std::remove_if(env.begin(), env.end(),
                             [&](const std::string& e) {
                               return e.compare(0, name.size() + 1,
                                                name + "=")
                                      == 0;
                             }),
              env.end());
  runner_spawn_options so;
  so.runner = runner;
  const char* test_python = std::getenv("MIBYAN_TEST_PYTHON");
  so.python = !opts.python.empty() ? opts.python
              : test_python != nullptr && *test_python != '\0'
                ? test_python
                : "python3";
  so.cwd = dir.path() + "/work";
  so.env = env;
  so.watchdog = opts.watchdog;
  so.sentinel = opts.pass_sentinel ? sentinel : std::string{};
  proc = std::make_unique<runner_process>(so);
  // The runner announces itself before it reads cells.
  ready = proc->read_frame(sentinel, std::chrono::seconds(30));
}

} // namespace mibyan::test
