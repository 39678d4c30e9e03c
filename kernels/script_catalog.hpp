// File: kernels/script_catalog.hpp
//
// The tools execute_code scripts may call, as one versioned snapshot
// (docs/execute_code.md, docs/mcp.md "In scripts"): the stub specs, their
// sorted names (the kernels' RPC allow-list) and the rendered
// `mibyan_tools` module. The runtime replaces the snapshot when the set
// changes at run time (an MCP server's tools/list_changed with
// `code_execution.mcp_in_scripts`); a new kernel starts with the current
// snapshot, a running kernel takes it before its next cell.
//
// Thread safety: every member may be called from any thread; snapshots
// are immutable and shared.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/stub_generator.hpp"

namespace mibyan {

class script_catalog {
public:
  struct snapshot {
    /// 1 for the start-up set, +1 for every change.
    uint64_t generation = 0;
    std::vector<script_tool_spec> specs;
    /// Sorted, unique: the allow-list.
    std::vector<std::string> names;
    /// generate_stub(names, specs).
    std::string stub;
  };

  explicit script_catalog(std::vector<script_tool_spec> specs);

  std::shared_ptr<const snapshot> current() const;

  /// Replaces the specs. When the rendered module or the names differ, a
  /// new snapshot (next generation) is published and true returned; an
  /// identical set changes nothing.
  bool update(std::vector<script_tool_spec> specs);

private:
  mutable std::mutex mtx_;
  std::shared_ptr<const snapshot> cur_;
};

} // namespace mibyan
