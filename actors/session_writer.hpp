// File: actors/session_writer.hpp
//
// The single writer of the session store, with group commit: requests are
// applied in arrival order, and all requests that arrive while a commit is
// being fsync'd share the next LMDB write transaction and its one fsync
// (session_store::commit_group; docs/storage.md, "Group commit"). A reply
// (success or error) is sent only after the transaction holding the write
// has committed durably, so a caller that waits for the reply knows its
// write survives a crash; a crash loses only writes not yet acknowledged.
// One request's bad input fails only that request. Runs detached (its own
// thread): LMDB commits wait for fsync. Readers do not go through this
// actor; they use the store's read functions directly (read transactions
// from any thread).
//
// Protocol:
//   (create_atom, session_meta) -> std::string            the session id
//   (append_atom, message_append) -> uint64_t             the message id
//   (usage_atom, usage_update) -> bool
//   (end_atom, std::string session_id, std::string reason) -> bool
// Failures come back as caf::error with the store's status code mapped
// one-to-one (actors/error_mapping.hpp: ec::internal, ec::not_found,
// ec::invalid_request, ...) and its message; the store is unchanged.
#pragma once

#include <memory>

#include "caf/fwd.hpp"
#include "caf/replies_to.hpp"
#include "caf/typed_actor.hpp"

#include "messages/type_ids.hpp"

namespace mibyan {

class session_store;
class lease_tokens;

using session_writer_actor = caf::typed_actor<
  caf::replies_to<create_atom, session_meta>::with<std::string>,
  caf::replies_to<append_atom, message_append>::with<uint64_t>,
  caf::replies_to<usage_atom, usage_update>::with<bool>,
  caf::replies_to<end_atom, std::string, std::string>::with<bool>>;

/// Spawns the writer over `store` (shared with readers; must stay open for
/// the writer's life). With `tokens`, every append, usage and end write of a
/// session whose lease this process holds carries its token
/// (store_write::fence): a write of a conversation whose lease moved to
/// another gateway fails with permission_denied ("fenced: ...").
session_writer_actor
spawn_session_writer(caf::actor_system& sys,
                     std::shared_ptr<session_store> store,
                     std::shared_ptr<lease_tokens> tokens = nullptr);

} // namespace mibyan
