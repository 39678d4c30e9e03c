// File: runtime/store_config.hpp
//
// The session store's options from the configuration (section `storage`,
// docs/configuration.md): every command that opens the store (the
// runtime, `mibyan sessions`, `mibyan cron`, `mibyan store`) builds them
// here, so they all open the same backend the same way.
//
// Thread safety: pure functions of their arguments (the environment is
// read through options::secret).
#pragma once

#include <functional>
#include <string>

#include "base/status.hpp"
#include "config/options.hpp"
#include "storage/session_store.hpp"

namespace mibyan {

/// The store options for `opts`: the backend, the LMDB directory
/// (`session_store::default_dir(opts.home)`), and for PostgreSQL the URL
/// with its `${VAR}` references expanded from the environment and .env and
/// the password from MIBYAN_PG_PASSWORD (environment, then .env) when the
/// URL has none. Errors (config_invalid, naming the key): postgres without
/// a URL, a `${VAR}` that is not set or not closed.
result<session_store_options> store_options_from(const options& opts);

/// Expands `${NAME}` references in `text` with `lookup(NAME)`. Errors
/// (config_invalid): an unclosed or empty reference, a name that is not
/// [A-Za-z0-9_]+, a variable that is unset or empty. `what` names the key
/// in messages; values never appear in them.
result<std::string>
expand_env_refs(const std::string& text, const char* what,
                const std::function<std::string(const std::string&)>& lookup);

} // namespace mibyan
