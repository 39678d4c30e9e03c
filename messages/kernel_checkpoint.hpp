// File: messages/kernel_checkpoint.hpp
#pragma once

#include <cstdint>
#include <string>

#include "caf/meta/type_name.hpp"

namespace mibyan {

/// A session's kernel checkpoint between cluster members
/// (docs/cluster.md, "Kernel state"): a worker hands what its kernel took
/// to the session's gateway, which stores it; a worker starting a kernel
/// for a session asks the gateway for the latest one. `bytes` is the
/// sealed envelope (HMAC included, actors/kernel_checkpoints.hpp); the
/// receiver verifies it before the bytes reach a kernel.
struct kernel_checkpoint {
  std::string session;
  uint64_t seq = 0;
  std::string bytes;
  /// Answers to a fetch: whether a checkpoint exists, and the highest
  /// execution count the gateway saw the session reach (-1: unknown),
  /// from which the restoring kernel tells the checkpoint's age in cells.
  bool found = false;
  int64_t known_count = -1;
  /// Why the fetch failed ("" when it did not).
  std::string error;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, kernel_checkpoint& x) {
  return f(caf::meta::type_name("mibyan::kernel_checkpoint"), x.session,
           x.seq, x.bytes, x.found, x.known_count, x.error);
}

} // namespace mibyan
