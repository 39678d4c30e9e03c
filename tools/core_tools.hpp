// File: tools/core_tools.hpp
//
// Factories of the built-in tools, one per tools/<name>.cpp.
#pragma once

#include <memory>

#include "tools/tool.hpp"

namespace mibyan {

std::unique_ptr<tool> make_read_file_tool();
std::unique_ptr<tool> make_write_file_tool();
std::unique_ptr<tool> make_patch_tool();
std::unique_ptr<tool> make_search_files_tool();
std::unique_ptr<tool> make_terminal_tool();
std::unique_ptr<tool> make_web_extract_tool();
std::unique_ptr<tool> make_web_search_tool();
std::unique_ptr<tool> make_process_tool();

} // namespace mibyan
