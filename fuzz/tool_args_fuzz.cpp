// Fuzz target: schema-driven argument coercion and validation
// (tools/args.hpp), the step every model-written tool call passes before a
// tool runs. The first byte picks a schema: one of a fixed set covering
// the supported subset (types, required, enum, minimum/maximum,
// items.type), or (odd bytes) a schema taken from the input itself, given
// before the first newline. The rest is the arguments JSON.
#include <cstdint>
#include <string>

#include "base/json.hpp"
#include "fuzz/fuzz_input.hpp"
#include "tools/args.hpp"

using namespace mibyan;

namespace {

const char* const schemas[] = {
  R"({"type":"object","properties":{"path":{"type":"string"},"offset":{"type":"integer","minimum":1},"limit":{"type":"integer","minimum":1,"maximum":2000}},"required":["path"]})",
  R"({"type":"object","properties":{"command":{"type":"string"},"background":{"type":"boolean"},"timeout":{"type":"number","minimum":0}},"required":["command"]})",
  R"({"type":"object","properties":{"mode":{"type":"string","enum":["replace","patch"]},"paths":{"type":"array","items":{"type":"string"}},"opts":{"type":"object"}},"required":["mode"]})",
  R"({"type":"object","properties":{"ids":{"type":"array","items":{"type":"integer"}},"ratio":{"type":"number","minimum":-1.5,"maximum":1e300},"flag":{"type":"boolean"}}})",
};

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0)
    return 0;
  auto text = fuzz::as_text(data + 1, size - 1);
  std::string_view schema_text, args_text = text;
  if (data[0] & 1) {
    auto nl = text.find('\n');
    if (nl == std::string_view::npos)
      return 0;
    schema_text = text.substr(0, nl);
    args_text = text.substr(nl + 1);
  } else {
    schema_text = schemas[(data[0] >> 1) % (sizeof schemas / sizeof *schemas)];
  }
  auto schema = json::parse(schema_text);
  auto args = json::parse(args_text);
  if (!schema || !args)
    return 0;
  auto a = *args.v;
  (void)coerce_and_validate(*schema.v, a);
  (void)a.dump();
  return 0;
}
