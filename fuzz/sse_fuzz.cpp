// Fuzz target: the SSE parser (base/sse_parser.hpp) fed in pieces,
// with a small event bound so the over-long paths are reached.
#include <cstdint>
#include <vector>

#include "fuzz/fuzz_input.hpp"
#include "base/sse_parser.hpp"

using namespace mibyan;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  for (size_t limit : {size_t{64}, sse_parser::default_max_event_bytes}) {
    sse_parser p{limit};
    std::vector<sse_event> out;
    fuzz::feed_in_pieces(data, size, [&](std::string_view piece) {
      p.feed(piece, out);
      if (out.size() > 64)
        out.clear();
    });
    p.finish(out);
  }
  return 0;
}
