// File: tools/execute_code.hpp
//
// The model-facing entry of execute_code: its schema and a description
// rendered from the live configuration. The call itself never reaches
// `run()`: the dispatcher routes it to the kernel registry.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tools/tool.hpp"

namespace mibyan {

/// `cfg` must outlive the tool; `tools` are the in-script tools (sorted).
std::unique_ptr<tool> make_execute_code_tool(const options& cfg,
                                             std::vector<std::string> tools);

} // namespace mibyan
