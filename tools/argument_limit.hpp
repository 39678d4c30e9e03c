// File: tools/argument_limit.hpp
//
// The one size limit on a tool call's arguments (`tools.max_argument_bytes`,
// docs/configuration.md). Every entry checks it before parsing: RPC lines
// from scripts (actors/kernel_rpc.cpp), the `mibyan tool` command and its
// --stdin lines (cli/tool_command.cpp), and the per-call dispatch path
// (actors/tool_invocation.cpp), which covers the agent loop too.
// Pure; no I/O.
#pragma once

#include <cstdint>

#include "base/status.hpp"

namespace mibyan {

/// Checks `size` bytes of argument JSON against `limit` (<= 0: no limit).
/// Over it: resource_exhausted, with the text shown to the caller (it
/// names the size, the limit and the option). Not retryable unchanged.
status check_argument_size(uint64_t size, int64_t limit);

} // namespace mibyan
