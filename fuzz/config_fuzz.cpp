// Fuzz target: the configuration loader (config/loader.hpp) on YAML text,
// and the .env parser on the same bytes. Accepted options must pass
// validate_options.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "config/loader.hpp"
#include "config/option_bounds.hpp"
#include "fuzz/fuzz_input.hpp"

using namespace mibyan;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text{fuzz::as_text(data, size)};
  auto r = parse_options(text, "fuzz.yaml");
  if (r.ok()) {
    // What the loader accepts passes the checks of options built in code.
    if (!validate_options(*r).ok())
      __builtin_trap();
    (void)render_options(*r);
  }
  std::map<std::string, std::string> env;
  std::vector<std::string> warnings;
  parse_env_file(text, env, &warnings);
  return 0;
}
