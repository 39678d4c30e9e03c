// File: cli/session_chain.hpp
//
// The chain around a stored session for `mibyan sessions show`: the
// sessions it continues (parent_session_id, followed upwards), and the
// sessions that continue it or were delegated from it (its children).
#pragma once

#include <string>
#include <vector>

#include "base/json.hpp"
#include "storage/session_record.hpp"

namespace mibyan {
class session_store;
}

namespace mibyan::cli {

struct session_chain {
  /// Oldest first, ending with the session itself.
  std::vector<session_info> lineage;
  /// Sessions whose parent is this one, oldest first.
  std::vector<session_info> children;
};

/// Reads the chain of `id` (read-only; at most 1000 ancestors).
session_chain read_session_chain(const session_store& store,
                                 const session_info& self);

/// Prints "chain: a -> b -> c (this)" and one line per child, when there
/// is more than the session itself.
std::string render_session_chain(const session_chain& c);

/// {"chain": [ids, oldest first], "children": [{"id", "source",
/// "end_reason", "title"}]}.
json::value session_chain_json(const session_chain& c);

} // namespace mibyan::cli
