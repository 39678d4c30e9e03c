// File: actors/mcp_server.hpp
//
// One actor per MCP server connection (docs/mcp.md, "Lifecycle"). The
// connection itself (transport, id space, handshake, catalog, breaker, call
// lock) is the CAF-free `mcp_session` it shares with the server's registry
// tools, which make their calls from blocking-pool threads. The actor owns
// the connection's upkeep:
// - a keepalive `ping` every `keepalive_interval` while connected and idle;
//   a failed ping disconnects (the next call reconnects);
// - recycling of stdio servers after `idle_timeout_seconds` without calls
//   or after `max_lifetime_seconds` of age (never during a call).
// Closing the sessions at shutdown is the runtime's job
// (mcp_manager::shutdown, after the actors got their exit message).
// Blocking work (ping round trip, killing a process) runs on the runtime's
// blocking pool; the actor only keeps timers and state.
//
// Protocol: none from outside; it stops with an exit message.
#pragma once

#include <memory>

#include "caf/actor.hpp"
#include "caf/actor_system.hpp"

#include "actors/services.hpp"

namespace mibyan {

class mcp_session;

/// Spawns the upkeep actor of `session`.
caf::actor spawn_mcp_server(caf::actor_system& sys, services_ptr svc,
                            std::shared_ptr<mcp_session> session);

} // namespace mibyan
