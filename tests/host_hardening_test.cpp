#define BOOST_TEST_MODULE host_hardening
#include <boost/test/unit_test.hpp>

// The host's SIGTERM handler (base/host_hardening.hpp) belongs to the host
// process only: a child forked by the host that is killed before it execs
// (a process-group kill right after a start) must die by itself, not wake
// the host's watcher through the inherited pipe and take the host down.

#include <csignal>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "base/host_hardening.hpp"

using namespace mibyan;

BOOST_AUTO_TEST_CASE(sigterm_to_a_forked_child_before_exec_spares_the_host) {
  harden_host_process();
  bool hook_ran = false;
  add_termination_hook([&hook_ran] { hook_ran = true; });
  for (int i = 0; i < 5; ++i) {
    pid_t pid = ::fork();
    BOOST_REQUIRE(pid >= 0);
    if (pid == 0) {
      // Still the host's image, handler inherited: as between fork and exec.
      ::kill(::getpid(), SIGTERM);
      ::pause();
      ::_exit(0);
    }
    int status = 0;
    BOOST_REQUIRE_EQUAL(::waitpid(pid, &status, 0), pid);
    BOOST_TEST(WIFEXITED(status));
    BOOST_TEST(WEXITSTATUS(status) == 128 + SIGTERM);
  }
  // Had the watcher been woken, it would have run the hook and re-raised
  // SIGTERM here, ending this process before the check below.
  std::this_thread::sleep_for(std::chrono::milliseconds{300});
  BOOST_TEST(!hook_ran);
}
