// File: tools/toolsets.hpp
//
// Named groups of tools (docs/tools.md, "Toolsets"): the static table,
// composite sets (`includes`), `all` / `*`, toolsets registered at run time
// (MCP servers, plugins) and the resolution of a selection (enabled sets
// minus disabled sets and tools) into the tool names offered to a model.
//
// Resolution:
//   * A set resolves to the union of its `tools`, every registered tool
//     whose own toolset() is the set's name, and its resolved `includes`;
//     one visited set ignores cycles and diamonds.
//   * `all` and `*` are every registered tool.
//   * Enabled = the call's sets, else `agent.toolsets`, else `all`. The
//     result is enabled minus the tools of `disabled_toolsets` minus
//     `disabled_tools`, restricted to tools present in the registry,
//     sorted by name. Disabling a `mibyan-*` bundle removes only its
//     non-core tools.
//   * An unknown set name is an error (status_code::invalid_argument) that
//     lists the valid names.
//
// Thread safety: a catalog may be read and extended from any thread
// (an internal mutex guards the dynamic sets).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.hpp"

namespace mibyan {

class tool_registry;
struct options;

/// One toolset: `tools` by name plus other sets by name.
struct toolset_def {
  std::string name;
  std::string description;
  std::vector<std::string> tools;
  std::vector<std::string> includes;
};

/// What to offer: enabled sets (empty = all) minus disabled ones.
struct toolset_selection {
  std::vector<std::string> enabled;
  std::vector<std::string> disabled_toolsets;
  std::vector<std::string> disabled_tools;
};

/// The tools of the core CLI bundle `mibyan-cli` (every built-in tool).
const std::vector<std::string>& core_tool_names();

class toolset_catalog {
public:
  /// A catalog holding the static table.
  toolset_catalog();

  /// Registers `def`, replacing a dynamic set of the same name. A static
  /// set's name, "all", "*" or an empty name is refused.
  status add(toolset_def def);

  /// Removes dynamic set `name`; false when there is none.
  bool remove(const std::string& name);

  /// Every set name a selection may use, sorted: static and dynamic sets,
  /// the toolsets of `reg`'s tools (when given), "all".
  std::vector<std::string> names(const tool_registry* reg = nullptr) const;

  /// The definition of `name` (static or dynamic), if any.
  bool find(const std::string& name, toolset_def* out) const;

  /// The tool names of sets `names` (recursive), restricted to tools in
  /// `reg`, sorted. Errors: an unknown name (listing the valid ones).
  result<std::vector<std::string>>
  expand(const tool_registry& reg, const std::vector<std::string>& names) const;

  /// Resolves `sel` against `reg` (see the file comment).
  result<std::vector<std::string>>
  resolve(const tool_registry& reg, const toolset_selection& sel) const;

  /// The selection configured in `cfg` (`agent.toolsets`,
  /// `agent.disabled_toolsets`, `agent.disabled_tools`) with `requested`
  /// (a call's or the CLI's `--toolsets`) replacing the enabled sets when
  /// non-empty.
  static toolset_selection selection_of(const options& cfg,
                                        const std::vector<std::string>& requested);

  /// A restricted copy of `base` for a sub-agent or other narrowed caller:
  /// `excluded_tools` are added to the disabled tools.
  static toolset_selection without(toolset_selection base,
                                   const std::vector<std::string>& excluded_tools);

private:
  mutable std::mutex mtx_;
  std::vector<toolset_def> dynamic_;
};

/// The tool names offered for a call whose `--toolsets` are `requested`:
/// `cat` (null = the static table only) resolving
/// toolset_catalog::selection_of(cfg, requested) against `reg`.
result<std::vector<std::string>>
offered_tool_names(const toolset_catalog* cat, const tool_registry& reg,
                   const options& cfg, const std::vector<std::string>& requested);

/// Maps a legacy set name to its current one (identity for others).
std::string canonical_toolset_name(const std::string& name);

} // namespace mibyan
