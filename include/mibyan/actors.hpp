// File: include/mibyan/actors.hpp  (public, actor-level API)
//
// For applications that already run their own `caf::actor_system` (CAF
// 0.17): Mibyan's actors (tool dispatcher, kernel registry, session writer,
// provider connections, conversations) are spawned into that system, and
// the application talks to them by message. This is the one public header
// that includes CAF; the facade headers (mibyan/mibyan.hpp) never do.
//
//   caf::actor_system_config cfg;
//   mibyan::actors::configure(cfg);          // before the system exists
//   caf::actor_system sys{cfg};
//   auto rt = mibyan::actors::attach(sys, mibyan::runtime_config{}, &err);
//   auto conv = mibyan::actors::spawn_conversation(*rt, agent_cfg, listener);
//   caf::scoped_actor self{sys};
//   self->request(conv, caf::infinite, mibyan::actors::run_atom_v,
//                 std::string{"hello"}).receive(
//     [](const std::string& result_json) { ... }, [](caf::error&) {});
//
// Lifetime: the runtime returned by attach() must be destroyed before the
// host's system (its destructor stops Mibyan's actors and waits for tool
// work), after the last turn sent to its actors has answered, and after
// the actors spawned by spawn_conversation() and spawn_tool_actor() have
// exited (monitor them and wait for their down messages: a conversation's
// exit closes its session through the runtime).
// docs/embedding.md, "Actor-level API", describes the protocol.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "caf/actor.hpp"
#include "caf/actor_system.hpp"
#include "caf/actor_system_config.hpp"
#include "caf/atom.hpp"

#include "mibyan/agent.hpp"
#include "mibyan/runtime.hpp"

namespace mibyan {

namespace actors {

// The verbs of the actor-level protocol (CAF 0.17 atom constants; they need
// no registration). Every payload is a std::string, so the application
// needs none of Mibyan's private message types.
using run_atom = caf::atom_constant<caf::atom("mb_run")>;
constexpr run_atom run_atom_v{};
using cancel_atom = caf::atom_constant<caf::atom("mb_cancel")>;
constexpr cancel_atom cancel_atom_v{};
using tool_atom = caf::atom_constant<caf::atom("mb_tool")>;
constexpr tool_atom tool_atom_v{};
using event_atom = caf::atom_constant<caf::atom("mb_event")>;
constexpr event_atom event_atom_v{};

/// Prepares the application's config before its system is constructed:
/// registers Mibyan's message types and error category and loads CAF's
/// middleman (the execute_code kernels are brokers). Do not load the
/// middleman a second time.
void configure(caf::actor_system_config& cfg);

/// Builds a runtime whose actors live in `sys` (a system whose config went
/// through configure()). Returns nullptr and sets `*error` on failure. The
/// facade (mibyan::agent, call_tool, ...) works on it as on any runtime.
std::unique_ptr<runtime> attach(caf::actor_system& sys,
                                const runtime_config& cfg,
                                std::string* error);

/// Spawns a conversation actor (one session, turns in arrival order) into
/// the runtime's system. Its protocol:
///   (run_atom, std::string prompt) -> std::string
///       runs one turn; answers with the turn result object as JSON text
///       ({"error": "..."} when the turn could not start)
///   (cancel_atom, std::string reason)
///       interrupts the running turn
///   an exit message
///       ends the conversation and disposes of its execute_code kernels
/// `listener` (may be invalid) receives (event_atom, std::string kind,
/// std::string text) while turns run: kind "text" and "reasoning" carry
/// streamed fragments, "tool_start" and "tool_end" a JSON object
/// ({"id","name","arguments"} / {"id","name","result","duration_us"}).
caf::actor spawn_conversation(runtime& rt, agent_config cfg,
                              caf::actor listener = {});

/// Spawns a tool actor into the runtime's system:
///   (tool_atom, std::string session_id, std::string tool,
///    std::string args_json) -> std::string result_json
/// Built-in and host tools, with their deadlines and caps; tool failures
/// are results ({"error": ...}), never errors.
caf::actor spawn_tool_actor(runtime& rt);

} // namespace actors

/// The actor system a runtime's actors live in (its own or the host's).
caf::actor_system& actor_system_of(runtime& rt);

/// Serialises and deserialises one default instance of every message type
/// in Mibyan's type-ID block through `sys`. Returns one line per failure
/// (empty: all passed). CAF 0.17 silently sends an empty message for an
/// unregistered type, so every runtime runs this at start-up.
std::vector<std::string> message_self_test(caf::actor_system& sys);

} // namespace mibyan
