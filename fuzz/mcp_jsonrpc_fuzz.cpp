// Fuzz target: the reading side of MCP's JSON-RPC (tools/mcp/mcp_message.hpp):
// a stdio server's output split into message lines under a small size
// limit, each line parsed as a message or batch and classified as the
// session would act on it (docs/mcp.md, "Transports").
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz/fuzz_input.hpp"
#include "tools/mcp/mcp_message.hpp"

using namespace mibyan;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mcp_line_reader reader{4096};
  size_t skipped = 0;
  auto on_message = [](std::string text) {
    auto msgs = parse_mcp_messages(text);
    if (!msgs)
      return;
    for (auto& m : *msgs) {
      // What the session reads of each kind.
      if (m.k == mcp_incoming::kind::reply)
        (void)m.id.as_int();
      else if (m.k == mcp_incoming::kind::request)
        (void)m.id.dump();
    }
  };
  auto on_skipped = [&skipped](size_t n) { skipped += n; };
  bool ok = true;
  fuzz::feed_in_pieces(data, size, [&](std::string_view piece) {
    if (ok)
      ok = reader.feed(piece, on_message, on_skipped);
  });
  return 0;
}
