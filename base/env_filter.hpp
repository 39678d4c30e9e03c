// File: base/env_filter.hpp
//
// Decides which environment variables a child process (terminal commands,
// later the execute_code kernel) may see. Pure functions over "NAME=value"
// strings: no global state, no I/O besides `current_environment`.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace mibyan {

/// Returns whether `name` looks like it holds a secret: its upper-cased form
/// contains KEY, TOKEN, SECRET, PASSWORD, CREDENTIAL, PASSWD or AUTH.
bool is_secret_env_name(std::string_view name);

/// Returns the credential names that can never be passed to children:
/// `<PROVIDER>_API_KEY` for every provider the runtime knows, plus a few
/// provider secrets of other shapes. Sorted; the single place the list
/// lives.
const std::vector<std::string>& provider_credential_names();

/// Returns whether `name` (compared upper-cased) is an LLM provider
/// credential (OPENAI_API_KEY, ANTHROPIC_API_KEY, ...). These never reach children, even when listed
/// in a passthrough list.
bool is_provider_credential(std::string_view name);

/// Returns the entries of `env` ("NAME=value") whose names are not secrets,
/// plus secret-looking ones listed by exact name in `passthrough` (unless
/// they are provider credentials). Entries without '=' are dropped. Order is
/// preserved.
std::vector<std::string>
filter_environment(const std::vector<std::string>& env,
                   const std::vector<std::string>& passthrough);

/// Returns a copy of the current process environment as "NAME=value"
/// strings. Not synchronised with concurrent setenv() calls (none of which
/// the runtime makes after start-up).
std::vector<std::string> current_environment();

} // namespace mibyan
