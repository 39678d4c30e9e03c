// File: kernels/stub_generator.hpp
//
// Generates the source of `mibyan_tools.py`, the module through which an
// execute_code script calls agent tools. The module holds a transport (one
// Unix-socket connection per process, request ids, and a leader/follower
// read path: the waiting caller that finds no reader reads and routes replies
// itself, so a single-threaded script needs no extra thread), the helpers `json_parse`, `shell_quote` and
// `retry`, and one function per allowed tool. The wire protocol is described
// in docs/kernel_protocol.md.
//
// Pure functions: no I/O, no state, safe to call from any thread.
#pragma once

#include <string>
#include <vector>

namespace mibyan {

/// One parameter of a stub function.
struct stub_parameter {
  /// Python name, equal to the tool's JSON schema property.
  std::string name;
  /// Python annotation ("" for none).
  std::string annotation;
  /// Python literal of the default ("" when the parameter is required).
  std::string default_literal;
};

/// Returns the tools a script may ever call, sorted: patch, read_file,
/// search_files, terminal, web_extract, web_search, write_file.
const std::vector<std::string>& script_tool_names();

/// Returns true when `name` is one of script_tool_names().
bool is_script_tool(const std::string& name);

/// Returns `enabled` ∩ script_tool_names(), sorted and without duplicates.
/// An empty result means the script gets no tools (helpers only).
std::vector<std::string> effective_script_tools(
  const std::vector<std::string>& enabled);

/// Returns the parameters of the stub function for `tool`, in signature
/// order, or an empty vector when `tool` is not a script tool.
const std::vector<stub_parameter>& stub_parameters(const std::string& tool);

/// Returns the Python source of `mibyan_tools.py` exposing the tools in
/// `tools` that are script tools (others are ignored; order and duplicates
/// do not matter: functions are emitted sorted). Always contains the
/// transport and the helpers, also when no tool is left.
std::string generate_stub(const std::vector<std::string>& tools);

} // namespace mibyan
