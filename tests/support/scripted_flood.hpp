// File: tests/support/scripted_flood.hpp
//
// A large streamed reply for the scripted provider server
// (tests/support/http_server.*): for tests of size limits and of slow
// readers. Header-only.
#pragma once

#include <string>

#include "base/json.hpp"

namespace mibyan::test {

/// The script (POST it with http_server::script(...dump())) of one
/// streamed chat completion of `deltas` content deltas of 1,000 'z' each
/// (about `deltas` KB of SSE), then [DONE]. Add "times" to repeat it.
inline json::value delta_flood(int deltas) {
  json::value s;
  s["path"] = "/v1/chat/completions";
  s["status"] = 200;
  s["headers"]["Content-Type"] = "text/event-stream";
  s["repeat_chunk"] = "data: {\"choices\":[{\"index\":0,\"delta\":"
                      "{\"content\":\"" + std::string(1000, 'z')
                      + "\"}}]}\n\n";
  s["repeat_times"] = deltas;
  s["chunks"] = json::value::make_array();
  s["chunks"].push_back("data: [DONE]\n\n");
  return s;
}

} // namespace mibyan::test
