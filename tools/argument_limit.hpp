// File: tools/argument_limit.hpp
//
// The one size limit on a tool call's arguments (`tools.max_argument_bytes`,
// docs/configuration.md). Every entry checks it before parsing: RPC lines
// from scripts (actors/kernel.cpp), the `mibyan tool` command and its
// --stdin lines (cli/tool_command.cpp), and the per-call dispatch path
// (actors/tool_invocation.cpp), which covers the agent loop too.
// Pure; no I/O.
#pragma once

#include <cstdint>
#include <string>

namespace mibyan {

/// Returns "" when `size` bytes of argument JSON are within `limit`, else
/// the error text shown to the caller (it names the limit and the option).
std::string argument_size_error(uint64_t size, int64_t limit);

} // namespace mibyan
