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
//   auto made = mibyan::actors::attach(sys, mibyan::runtime_config{});
//   auto rt = std::move(*made);               // check `made` first
//   auto conv = mibyan::actors::spawn_conversation(*rt, agent_cfg, listener);
//   caf::scoped_actor self{sys};
//   self->request(conv, caf::infinite, mibyan::actors::run_atom_v,
//                 std::string{"hello"}).receive(
//     [](const mibyan::turn_result& r) { ... }, [](caf::error&) {});
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
#include "caf/replies_to.hpp"
#include "caf/typed_actor.hpp"

#include "mibyan/agent.hpp"
#include "mibyan/runtime.hpp"
#include "mibyan/status.hpp"
#include "mibyan/turn.hpp"

namespace mibyan {

namespace actors {

// The verbs of the actor-level protocol (CAF 0.17 atom constants; they need
// no registration). The payloads are strings and the public value types of
// mibyan/turn.hpp (turn_result, tool_event), which configure() registers.
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
/// through configure()). Fails as runtime::create does. The facade
/// (mibyan::agent, call_tool, ...) works on it as on any runtime.
result<std::unique_ptr<runtime>> attach(caf::actor_system& sys,
                                        const runtime_config& cfg);

/// What a conversation's listener receives while turns run: streamed
/// fragments (kind "text" or "reasoning", and the text) and tool activity.
using event_listener = caf::typed_actor<
  caf::reacts_to<event_atom, std::string, std::string>,
  caf::reacts_to<event_atom, tool_event>>;

/// A conversation actor (one session, turns in arrival order):
///   (run_atom, std::string prompt) -> turn_result
///       runs one turn and answers with its result (`started` false and
///       `error` set when it could not start)
///   (cancel_atom, std::string reason)
///       interrupts the running turn
///   an exit message
///       ends the conversation and disposes of its execute_code kernels
using conversation_handle = caf::typed_actor<
  caf::replies_to<run_atom, std::string>::with<turn_result>,
  caf::reacts_to<cancel_atom, std::string>>;

/// A tool actor:
///   (tool_atom, std::string session_id, std::string tool,
///    std::string args_json) -> std::string result_json
/// Built-in and host tools, with their deadlines and caps; tool failures
/// are results ({"error": ...}), never errors.
using tool_handle = caf::typed_actor<
  caf::replies_to<tool_atom, std::string, std::string,
                  std::string>::with<std::string>>;

/// Spawns a conversation actor into the runtime's system. `listener` (may
/// be invalid) receives the events of its turns.
conversation_handle spawn_conversation(runtime& rt, agent_config cfg,
                                       event_listener listener = {});

/// Spawns a tool actor into the runtime's system.
tool_handle spawn_tool_actor(runtime& rt);

} // namespace actors

/// The actor system a runtime's actors live in (its own or the host's).
caf::actor_system& actor_system_of(runtime& rt);

/// Serialises and deserialises one default instance of every message type
/// in Mibyan's type-ID block through `sys`. Returns one line per failure
/// (empty: all passed). CAF 0.17 silently sends an empty message for an
/// unregistered type, so every runtime runs this at start-up.
std::vector<std::string> message_self_test(caf::actor_system& sys);

} // namespace mibyan
