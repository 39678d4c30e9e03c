// File: base/credential_vault.hpp
//
// Keeps provider credentials (base/env_filter.hpp
// is_provider_credential) out of the process environment: `seal` moves
// them into memory and wipes them from the environment, including the
// original strings the kernel shows in /proc/PID/environ, so neither a
// child process nor a reader of /proc finds them there
// (docs/security.md, "Credentials").
//
// Thread safety: all functions are thread-safe. `seal` edits the process
// environment (unsetenv): call it at start-up, before threads that read the
// environment run.
#pragma once

#include <string>

namespace mibyan {

/// Moves every provider credential from the environment into the vault.
/// Idempotent; later calls move credentials set since.
void seal_credentials();

/// Returns the value of `name`: the live environment first (a value set
/// after sealing), then the sealed copy; "" when neither has one.
std::string credential_value(const std::string& name);

} // namespace mibyan
