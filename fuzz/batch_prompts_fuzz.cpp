// Fuzz target: the `mibyan batch` prompts-file parser
// (storage/batch_run.hpp, docs/batch.md).
#include <cstdint>

#include "fuzz/fuzz_input.hpp"
#include "storage/batch_run.hpp"

using namespace mibyan;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto pf = batch::parse_prompts(fuzz::as_text(data, size));
  for (auto& p : pf.prompts)
    (void)p.metadata.dump();
  (void)batch::tool_result_failed(fuzz::as_text(data, size));
  return 0;
}
