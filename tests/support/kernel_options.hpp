// File: tests/support/kernel_options.hpp
//
// Runtime options of the tests that run execute_code kernels: a private
// home, `prestart` spare kernels, scripts approved without a human
// (docs/approvals.md, whole-script guard), and the sandbox mode of
// MIBYAN_TEST_SANDBOX when set (ctest runs execute_code_test both
// sandboxed and with `off`; docs/testing.md).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>

#include "config/options.hpp"

namespace mibyan::test {

inline options kernel_test_options(const std::string& home,
                                   int64_t prestart = 0) {
  options opts;
  opts.home = home;
  opts.code_execution.prestart_kernels = prestart;
  if (const char* sb = std::getenv("MIBYAN_TEST_SANDBOX"); sb && *sb)
    opts.code_execution.sandbox = sb;
  opts.approvals.unattended_mode = "approve";
  return opts;
}

} // namespace mibyan::test
