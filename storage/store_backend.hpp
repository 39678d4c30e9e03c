// File: storage/store_backend.hpp
//
// The registry of session-store backends behind open_session_store
// (storage/session_store.hpp). "lmdb" is always registered; other
// backends compiled into this build register themselves in
// register_builtin_store_backends (storage/store_backends_builtin.cpp),
// which runs once before the first lookup. Embedders and tests may add or
// replace a backend with register_store_backend.
//
// Thread safety: every function may be called from any thread.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "storage/session_store.hpp"

namespace mibyan {

/// Opens a store of one backend from the options (their `backend` field
/// names it). Errors are the backend's own.
using store_backend_opener =
  std::function<store_result<std::unique_ptr<session_store>>(
    const session_store_options&)>;

/// Registers `open` under `name` ("lmdb", "postgres", ...), replacing an
/// earlier registration of that name; an empty `open` removes it.
void register_store_backend(const std::string& name,
                            store_backend_opener open);

/// The opener registered under `name` (empty when none).
store_backend_opener find_store_backend(const std::string& name);

/// ok when `name` is registered; else config_invalid saying whether the
/// name is unknown or only missing from this build (the message
/// open_session_store gives).
store_status check_store_backend(const std::string& name);

/// The names registered now, sorted.
std::vector<std::string> store_backend_names();

/// The backend names `storage.backend` accepts, whether or not this build
/// has them: "lmdb", "postgres".
const std::vector<std::string>& known_store_backends();

/// Registers the backends compiled into this build (the list is in
/// storage/store_backends_builtin.cpp). Called once by the registry.
void register_builtin_store_backends();

} // namespace mibyan
