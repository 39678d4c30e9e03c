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

#include "base/json.hpp"

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

/// A script tool outside the built-in table: a tool the embedding host
/// registered with `allow_in_scripts` (docs/embedding.md). Its stub
/// function is rendered from its JSON schema.
struct script_tool_spec {
  std::string name;
  std::vector<stub_parameter> params;
  /// The docstring of the stub function (one line).
  std::string doc;
  /// For an MCP tool (docs/mcp.md, "In scripts"): the sanitised server and
  /// tool names. Such a tool is reachable as
  /// `mibyan_tools.mcp.<server>.<tool>(**args)` instead of a top-level
  /// function.
  std::string mcp_server;
  std::string mcp_tool;
};

/// Returns true when `name` can be a Python function name of the stub
/// (an identifier, not a keyword, not starting with '_').
bool is_stub_identifier(const std::string& name);

/// Builds the stub of a host tool from its JSON schema: required
/// properties first (in `required` order), then the optional ones with a
/// None default, both in schema order. Returns false and sets `*error`
/// when the name or a property name is no Python identifier.
bool make_script_tool_spec(const std::string& name,
                           const std::string& description,
                           const json::value& schema, script_tool_spec* out,
                           std::string* error);

/// Returns "name(a, b=None)": the signature of `spec` as shown to models.
std::string stub_signature(const script_tool_spec& spec);

/// As generate_stub(tools), plus one function per entry of `extra` whose
/// name is in `tools` (AVAILABLE_TOOLS lists them too).
std::string generate_stub(const std::vector<std::string>& tools,
                          const std::vector<script_tool_spec>& extra);

} // namespace mibyan
