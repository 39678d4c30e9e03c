// File: tools/script_specs.hpp
//
// The stub functions of the built-in tools that execute_code scripts may
// call, generated from each tool's schema() and script() policy
// (tools/tool.hpp) by the same generator as the host and MCP tools
// (kernels/stub_generator.hpp).
//
// Pure functions of the tools' declarations; safe from any thread.
#pragma once

#include <vector>

#include "base/status.hpp"
#include "kernels/stub_generator.hpp"
#include "tools/registry.hpp"

namespace mibyan {

/// Returns the stub spec of `t`: its schema without the policy's stripped
/// properties, and a docstring made of the description's first sentence
/// plus the policy's result shape. Fails (internal) when the schema has a
/// property that is no Python identifier.
result<script_tool_spec> builtin_script_spec(const tool& t);

/// Returns the specs of the tools in `reg` whose script() policy allows
/// scripts, sorted by name.
result<std::vector<script_tool_spec>> builtin_script_specs(
  const tool_registry& reg);

/// The specs of the core tools (register_core_tools), built once. For
/// tests and benchmarks that start kernels without a runtime.
const std::vector<script_tool_spec>& core_script_specs();

/// The names of core_script_specs(), sorted.
std::vector<std::string> core_script_tool_names();

} // namespace mibyan
