// File: tools/execute_code.hpp
//
// The model-facing entry of execute_code: its schema and a description
// rendered from the live configuration. The call itself never reaches
// `run()`: the dispatcher routes it to the kernel registry.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernels/script_catalog.hpp"
#include "kernels/stub_generator.hpp"
#include "tools/tool.hpp"

namespace mibyan {

/// `cfg` must outlive the tool; `tools` are the in-script tools (sorted),
/// `specs` their stub specs (tools/script_specs.hpp; the signatures listed
/// in the description are rendered from them).
/// `catalog` (may be null): when set, the description lists its current
/// snapshot instead of `tools`/`specs` (the set follows MCP tool changes).
std::unique_ptr<tool> make_execute_code_tool(
  const options& cfg, std::vector<std::string> tools,
  std::vector<script_tool_spec> specs = {},
  std::shared_ptr<const script_catalog> catalog = nullptr);

} // namespace mibyan
