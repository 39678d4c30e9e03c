// File: tests/support/kernel_options.hpp
//
// Helpers of the tests that run execute_code kernels. Include after
// <boost/test/unit_test.hpp>.
//
// kernel_test_options: runtime options with a private
// home, `prestart` spare kernels, scripts approved without a human
// (docs/approvals.md, whole-script guard), and the sandbox mode of
// MIBYAN_TEST_SANDBOX when set (ctest runs execute_code_test both
// sandboxed and with `off`; docs/testing.md).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>

#include "base/json.hpp"
#include "config/options.hpp"
#include "runtime/runtime.hpp"

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

/// Runs `code` as one execute_code call of `session` in `cwd` (with
/// "reset": true when `reset`) and returns the parsed result object (the
/// test stops when it is no JSON).
inline json::value run_cell(runtime& rt, const std::string& cwd,
                            const std::string& code,
                            const std::string& session = "s1",
                            bool reset = false) {
  json::value args;
  args["code"] = code;
  if (reset)
    args["reset"] = true;
  auto out = rt.call_tool({session, "call", "execute_code", args.dump(), cwd});
  auto parsed = json::parse(out.result_json);
  BOOST_REQUIRE_MESSAGE(parsed, out.result_json);
  return *parsed.v;
}

} // namespace mibyan::test
