#include "tools/core_tools.hpp"

#include "tools/registry.hpp"

namespace mibyan {

void register_core_tools(tool_registry& reg) {
  reg.add(make_read_file_tool());
  reg.add(make_write_file_tool());
  reg.add(make_patch_tool());
  reg.add(make_search_files_tool());
  reg.add(make_terminal_tool());
  reg.add(make_web_extract_tool());
  reg.add(make_web_search_tool());
  reg.add(make_process_tool());
}

} // namespace mibyan
