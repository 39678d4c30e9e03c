// File: tests/support/proc_counts.hpp
//
// What this test process holds, read from /proc/self: open fds, threads
// and child processes (live and zombie), for the leak and teardown tests
// (docs/testing.md, "Soak and leaks"). Linux only.
#pragma once

#include <string>

namespace mibyan::test {

/// Open descriptors of this process (the one used to count them excluded).
long open_fds();

/// "N=target" for every open descriptor, for failure messages.
std::string list_fds();

/// Threads of this process.
long thread_count();

struct children_info {
  long live = 0;
  long zombies = 0;
};

/// Children of any thread of this process, split into live and zombie.
children_info children();

} // namespace mibyan::test
