// File: runtime/runtime.hpp
//
// The library-internal view of the runtime: the public class of
// include/mibyan/runtime.hpp plus the private types its internal members
// use (the full option struct, the tool interface and registry). The CLI,
// the benchmarks and the tests include this header; applications include
// mibyan/runtime.hpp (docs/embedding.md).
#pragma once

#include "mibyan/runtime.hpp"

#include "config/options.hpp"
#include "tools/tool.hpp"

namespace mibyan {

class session_store;
class toolset_catalog;

/// The session store `rt` writes (nullptr when it could not be opened).
/// Reads may run on any thread; writes other than deletes go through the
/// runtime's actors. For the node's own front ends (the HTTP server).
std::shared_ptr<session_store> session_store_of(runtime& rt);

class pending_approvals;

/// The pending-request registry of `rt` (runtime/pending_approvals.hpp):
/// for the node's own front ends and the coordinator's event wiring.
pending_approvals& pending_of(runtime& rt);

/// The toolsets of `rt` (tools/toolsets.hpp): resolve a selection, or
/// register dynamic sets (MCP servers, plugins) at any time.
toolset_catalog& toolsets_of(runtime& rt);

} // namespace mibyan
