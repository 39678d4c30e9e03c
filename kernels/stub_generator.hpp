// File: kernels/stub_generator.hpp
//
// Generates the source of `mibyan_tools.py`, the module through which an
// execute_code script calls agent tools. The module holds a transport (one
// Unix-socket connection per process, request ids, and a leader/follower
// read path: the waiting caller that finds no reader reads and routes replies
// itself, so a single-threaded script needs no extra thread), the helpers `json_parse`, `shell_quote` and
// `retry`, and one function per allowed tool. The transport and helpers are
// the Python module kernels/mibyan_tools_transport.py, embedded at build time
// (kernels/runner_source.hpp); the functions are generated from the tools'
// schemas. The wire protocol is described in docs/kernel_protocol.md.
//
// Pure functions: no I/O, no state, safe to call from any thread.
#pragma once

#include <string>
#include <vector>

#include "base/json.hpp"
#include "base/status.hpp"

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

/// One function of the stub, rendered from a tool's JSON schema by
/// make_script_tool_spec: a built-in tool whose script policy allows scripts
/// (tools/tool.hpp, collected by tools/script_specs.hpp), a tool the
/// embedding host registered with `allow_in_scripts` (docs/embedding.md), or
/// an MCP tool.
struct script_tool_spec {
  std::string name;
  std::vector<stub_parameter> params;
  /// The docstring of the stub function (one line).
  std::string doc;
  /// The result's shape for a built-in tool (its script() policy), shown
  /// after its signature in execute_code's description; "" for the others.
  std::string returns;
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

/// Builds the stub of a tool from its JSON schema: required
/// properties first (in `required` order), then the optional ones with a
/// None default in schema order (the dispatcher treats an explicit null as
/// absent, so the tool's own default applies). invalid_argument when the
/// name or a property name is no Python identifier (the message names it).
result<script_tool_spec> make_script_tool_spec(const std::string& name,
                                               const std::string& description,
                                               const json::value& schema);

/// Returns "name(a, b=None)": the signature of `spec` as shown to models.
std::string stub_signature(const script_tool_spec& spec);

/// Returns the Python source of `mibyan_tools.py` with one function per
/// entry of `specs` whose name is in `tools` (the first entry of a name
/// wins; order and duplicates do not matter: functions are emitted sorted,
/// and AVAILABLE_TOOLS lists them). MCP entries go to the `mcp` namespace.
/// Always contains the transport and the helpers, also when no tool is
/// left.
std::string generate_stub(const std::vector<std::string>& tools,
                          const std::vector<script_tool_spec>& specs);

/// Returns `text` up to and including its first sentence end (". " or a
/// final '.') or up to its first newline, whichever comes first.
std::string first_sentence(const std::string& text);

} // namespace mibyan
