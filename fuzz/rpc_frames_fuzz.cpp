// Fuzz target: the kernel side of the execute_code wire (docs/kernel_protocol.md):
// the reply-frame parser over a kernel's stdout, the RPC line splitter over
// the Unix socket, and the RPC request decoder for every line.
#include <cstdint>
#include <string>

#include "fuzz/fuzz_input.hpp"
#include "kernels/frame_parser.hpp"
#include "kernels/line_splitter.hpp"
#include "kernels/rpc_codec.hpp"

using namespace mibyan;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Reply frames: small limits so the oversized and error paths are hit.
  for (bool skip_oversized : {false, true}) {
    frame_parser fp{"@@S@@", 4096};
    size_t frames = 0;
    frame_parser::callbacks cb;
    cb.on_raw = [](std::string_view) {};
    cb.on_frame = [&frames](std::string body) {
      ++frames;
      rpc_request req;
      (void)decode_rpc_request(body, req);
    };
    cb.on_error = [](std::string) {};
    if (skip_oversized)
      cb.on_oversized = [](uint64_t) {};
    fuzz::feed_in_pieces(data, size,
                         [&](std::string_view piece) { fp.feed(piece, cb); });
    fp.finish(cb);
  }
  // RPC request lines.
  line_splitter ls{2048};
  fuzz::feed_in_pieces(data, size, [&](std::string_view piece) {
    ls.feed(piece, [](std::string_view line) {
      rpc_request req;
      auto decoded = decode_rpc_request(line, req);
      auto id = peek_rpc_id(line);
      if (decoded) {
        (void)encode_rpc_response(req.id, "{}");
        (void)token_matches("tok", req.token);
      } else {
        (void)encode_rpc_error(id, decoded.error);
      }
    });
  });
  return 0;
}
