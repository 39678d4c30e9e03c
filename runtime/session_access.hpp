// File: runtime/session_access.hpp
//
// What a front end that owns sessions of its own (the ACP agent, acp/)
// needs from a runtime beyond the public API: per-session file access
// through its client (tools/client_files.hpp) and read access to the
// session store the runtime holds open (one LMDB environment per process).
//
// Thread safety: any thread.
#pragma once

#include <memory>
#include <string>

namespace mibyan {

class runtime;
class session_store;
class tool_registry;
class http_client;
struct client_file_access;

/// Makes read_file, write_file and patch calls of `session_id` use `files`
/// (null removes it). close_session also removes it.
void set_session_file_access(runtime& rt, const std::string& session_id,
                             std::shared_ptr<const client_file_access> files);

/// Offers `tools` to the turns of `session_id` only, next to the
/// runtime's tools (null removes them; close_session also does).
void set_session_tools(runtime& rt, const std::string& session_id,
                       std::shared_ptr<const tool_registry> tools);

/// The runtime's HTTP client (one curl-multi thread); never null while
/// the runtime lives.
http_client* runtime_http_client(runtime& rt);

/// The runtime's session store; null when it could not be opened.
std::shared_ptr<session_store> runtime_session_store(runtime& rt);

} // namespace mibyan
