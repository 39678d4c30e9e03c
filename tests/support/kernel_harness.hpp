// File: tests/support/kernel_harness.hpp
//
// Sets up one kernel the way the kernel actor will: a private staging dir
// holding the runner with its modules (kernels/runner_source.hpp) and a
// generated mibyan_tools.py, an environment built by build_kernel_env()
// from the test's environment, a fresh sentinel, then spawns the runner
// through runner_process.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tests/support/kernel_runner_process.hpp"
#include "tests/support/temp_dir.hpp"

namespace mibyan::test {

struct kernel_harness_options {
  /// Interpreter; default: $MIBYAN_TEST_PYTHON, else python3 on PATH.
  std::string python;
  /// Tools given to generate_stub() (default: all seven).
  std::vector<std::string> tools{"patch",    "read_file",   "search_files",
                                 "terminal", "web_extract", "web_search",
                                 "write_file"};
  /// MIBYAN_RPC_SOCKET and MIBYAN_RPC_TOKEN ("" leaves them unset).
  std::string rpc_socket;
  std::string rpc_token;
  /// MIBYAN_RPC_TIMEOUT (<= 0: the stub default).
  double rpc_timeout = 0;
  /// Pass a watchdog pipe.
  bool watchdog = true;
  /// Extra "NAME=value" entries appended after scrubbing.
  std::vector<std::string> extra_env;
  /// Names removed from the final environment.
  std::vector<std::string> remove_env;
  /// Pass the sentinel on its pipe (false: the runner gets none).
  bool pass_sentinel = true;
};

class kernel_harness {
public:
  explicit kernel_harness(kernel_harness_options opts = {});

  /// Runs one cell and returns its frame.
  runner_frame run(const std::string& code,
                   std::chrono::milliseconds timeout
                   = std::chrono::seconds(30)) {
    return proc->run(sentinel, code, timeout);
  }

  /// Holds the staging files (runner, its modules, stub); `work/` is the cwd.
  temp_dir dir;
  std::string sentinel;
  std::string stub_path;
  std::vector<std::string> env;
  std::unique_ptr<runner_process> proc;
  /// The "ready" frame the runner sent at start-up.
  runner_frame ready;
};

} // namespace mibyan::test
