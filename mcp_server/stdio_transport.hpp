// File: mcp_server/stdio_transport.hpp
//
// The stdio transport of `mibyan mcp serve` (MCP basic/transports,
// "stdio"): one session; the client's messages arrive one per line on
// `in_fd` (UTF-8 JSON, no embedded newlines), ours leave one per line on
// `out_fd`, which carries nothing else. A line longer than the limit, a
// line that is no JSON and a batch each get a JSON-RPC error with a null
// id; the transport goes on reading. End of input (the client closed the
// pipe or exited) or `stop_fd` turning readable ends the session: running
// calls are interrupted and no responses follow.
//
// Threads: the caller's thread reads; one writer thread owned by the call
// writes, so a client that does not read its pipe never blocks a runtime
// thread (the queue is bounded by `max_queued_bytes`; past it the client
// is treated as gone).
#pragma once

#include <cstddef>

#include "mcp_server/server_core.hpp"

namespace mibyan {

struct mcp_stdio_settings {
  size_t max_message_bytes = size_t{4} << 20;
  size_t max_queued_bytes = size_t{64} << 20;
};

/// Serves one session until end of input, a write failure or `stop_fd`
/// (-1: none) becomes readable. Returns 0 after end of input or a stop,
/// 1 after a read or write failure.
int serve_mcp_stdio(mcp_server_core& core, int in_fd, int out_fd, int stop_fd,
                    const mcp_stdio_settings& settings);

} // namespace mibyan
