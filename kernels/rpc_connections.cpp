#include "kernels/rpc_connections.hpp"

namespace mibyan {

std::string rpc_limit_message(rpc_verdict v, const rpc_limits& lim) {
  switch (v) {
    case rpc_verdict::ok:
      return {};
    case rpc_verdict::too_many_connections:
      return "Too many RPC connections: this kernel allows "
             + std::to_string(lim.max_connections)
             + " open at once (code_execution.max_rpc_connections); the "
               "connection was closed and nothing was run.";
    case rpc_verdict::frame_too_long:
      return "Invalid RPC request: a request line is longer than "
             + std::to_string(lim.max_frame)
             + " bytes (code_execution.max_rpc_frame_bytes); the connection "
               "was closed and the request was not run.";
    case rpc_verdict::buffer_full:
      return "Invalid RPC request: unfinished request lines of this kernel "
             "exceed " + std::to_string(lim.max_buffered)
             + " bytes (code_execution.max_rpc_buffered_bytes); the "
               "connection was closed and its request was not run.";
  }
  return {};
}

} // namespace mibyan
