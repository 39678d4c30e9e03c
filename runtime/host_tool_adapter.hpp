// File: runtime/host_tool_adapter.hpp
//
// Turns the application's host tools (mibyan/host_tool.hpp) into tools of
// the registry, so they run exactly like built-in tools: through
// tool_invocation, on the blocking pool, under its deadline and interrupts.
// CAF-free.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/status.hpp"
#include "kernels/stub_generator.hpp"
#include "mibyan/host_tool.hpp"
#include "tools/tool.hpp"

namespace mibyan {

/// Validates `host` (names, schemas, exactly one handler, no clash with a
/// built-in tool or another host tool) and appends one registry tool per
/// entry to `*tools` and one stub spec per script-callable entry to
/// `*scripts`. config_invalid naming the first bad entry.
status make_host_tools(const std::vector<host_tool>& host,
                       std::vector<std::unique_ptr<tool>>* tools,
                       std::vector<script_tool_spec>* scripts);

} // namespace mibyan
