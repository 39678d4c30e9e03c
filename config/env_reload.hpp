// File: config/env_reload.hpp
//
// Re-reading `$MIBYAN_HOME/.env` (or `$MIBYAN_ENV`) at the start of a turn,
// so a key added while a chat runs is used from the next turn on
// (docs/configuration.md). Blocking file I/O: call it off the actor
// scheduler threads (the runtime calls it on the thread that starts a turn).
#pragma once

#include <string>

#include "base/status.hpp"
#include "config/options.hpp"

namespace mibyan {

/// Replaces `o.env_file` with the current contents of the .env file of
/// `o.home`. A missing file empties it; an unreadable file keeps the old
/// values and fails with the errno's code and the reason. Malformed lines
/// are skipped, as at start-up.
status reload_env_file(options& o);

} // namespace mibyan
