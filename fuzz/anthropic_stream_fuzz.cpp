// Fuzz target: the Anthropic Messages stream accumulator fed raw body
// bytes in pieces, then finished; and the non-streamed response parser
// (providers/anthropic_codec.hpp).
#include <cstdint>

#include "fuzz/fuzz_input.hpp"
#include "providers/anthropic_codec.hpp"

using namespace mibyan;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  anthropic::stream_accumulator acc{4096};
  acc.on_text([](std::string_view) {});
  acc.on_reasoning([](std::string_view) {});
  fuzz::feed_in_pieces(data, size,
                       [&](std::string_view piece) { acc.feed(piece); });
  (void)acc.finish(200);
  (void)anthropic::parse_response(200, fuzz::as_text(data, size));
  (void)anthropic::parse_response(500, fuzz::as_text(data, size));
  return 0;
}
