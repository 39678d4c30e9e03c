// The runtime's I/O loop (runtime/io_loop.cpp) and the hint that opens its
// polling window (base/io_poll_hint.hpp; docs/architecture.md, "Actor
// system settings").
#define BOOST_TEST_MODULE io_loop
#include <boost/test/unit_test.hpp>

#include <string>
#include <thread>

#include "base/io_poll_hint.hpp"
#include "base/json.hpp"
#include "config/options.hpp"
#include "runtime/runtime.hpp"
#include "tests/support/kernel_options.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mibyan;

BOOST_AUTO_TEST_CASE(the_hint_belongs_to_the_thread_that_set_it) {
  BOOST_TEST(!take_answer_soon_hint());
  expect_answer_soon();
  bool seen_elsewhere = true;
  std::thread other{[&] { seen_elsewhere = take_answer_soon_hint(); }};
  other.join();
  BOOST_TEST(!seen_elsewhere);
  BOOST_TEST(take_answer_soon_hint());
  BOOST_TEST(!take_answer_soon_hint()); // taken once
}

// A wide window (10 ms) keeps the loop polling through most of this test:
// warm cells, a script's tool calls, a cell that outlives its deadline and
// the kernel that replaces it behave as with a loop that sleeps, and the
// runtime stops (the loop returns once its handlers are gone; a loop that
// kept polling would hang the destructor and the suite's timeout fails it).
BOOST_AUTO_TEST_CASE(a_polling_loop_runs_cells_and_stops) {
  test::temp_dir home, work;
  auto opts = test::kernel_test_options(home.path());
  opts.runtime.io_spin_us = 10'000;
  opts.code_execution.timeout = 2;
  opts.code_execution.max_tool_calls = 500;
  std::string err;
  auto made = create_runtime(opts);
  BOOST_REQUIRE_MESSAGE(made, made.error);
  auto rt = std::move(*made);
  for (int i = 0; i < 200; ++i) {
    auto r = test::run_cell(*rt, work.path(), "print(" + std::to_string(i)
                                                  + ")");
    BOOST_REQUIRE_EQUAL(r.get_string("output"), std::to_string(i) + "\n");
  }
  auto calls = test::run_cell(
    *rt, work.path(),
    "from mibyan_tools import write_file, read_file\n"
    "write_file('a.txt', 'x')\n"
    "print(sum(isinstance(read_file('a.txt'), dict) for _ in range(100)))");
  BOOST_TEST(calls.get_string("status") == "success");
  BOOST_TEST(calls.get_string("output") == "100\n");
  BOOST_TEST(calls.get_int("tool_calls_made", 0) == 101);
  auto slow = test::run_cell(*rt, work.path(),
                             "import time\ntime.sleep(60)");
  BOOST_TEST(slow.get_string("status") == "timeout");
  auto after = test::run_cell(*rt, work.path(), "print('fresh')");
  BOOST_TEST(after.get_string("output") == "fresh\n");
  rt.reset();
}
