// Fuzz target: the approval normaliser (approvals/normalize.hpp): every
// command a model or script sends to `terminal` goes through it before the
// dangerous-command patterns see it.
#include <cstdint>
#include <string>

#include "approvals/normalize.hpp"
#include "fuzz/fuzz_input.hpp"

using namespace mibyan;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto cmd = fuzz::as_text(data, size);
  approvals::home_paths paths;
  paths.home = "/home/u";
  paths.mibyan_home = "/home/u/.mibyan";
  paths.home_unresolved = "/h/u";
  (void)approvals::make_variants(cmd, paths);
  (void)approvals::normalize_preserving_case(cmd, approvals::home_paths{});
  (void)approvals::has_shell_operators(cmd);
  (void)approvals::strip_comments(cmd);
  return 0;
}
