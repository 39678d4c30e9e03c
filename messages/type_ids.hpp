// File: messages/type_ids.hpp
//
// The one type-ID block of Mibyan. Every type that travels in a message is
// listed here, so that every node registers the same names (CAF 0.17 puts
// type names on the wire, and silently sends an empty message for an
// unregistered type). `runtime/self_test.cpp` round-trips each entry at
// start-up. Include only from messages/, actors/, runtime/ and cluster/ (and the
// tests and benchmarks).
#pragma once

#include <vector>

#include "caf/atom.hpp"
#include "caf/error.hpp"
#include "caf/type_id.hpp"

#include "messages/background_notice.hpp"
#include "messages/chat.hpp"
#include "messages/chat_request.hpp"
#include "messages/cluster.hpp"
#include "messages/error_code.hpp"
#include "messages/exec_cell.hpp"
#include "messages/interrupt_request.hpp"
#include "messages/kernel_checkpoint.hpp"
#include "messages/kernel_info.hpp"
#include "messages/session_events.hpp"
#include "messages/tool_request.hpp"
#include "messages/tool_response.hpp"
#include "messages/turn_request.hpp"
#include "messages/turn_result.hpp"

CAF_ERROR_CODE_ENUM(mibyan::ec, "mibyan")

CAF_BEGIN_TYPE_ID_BLOCK(mibyan, caf::first_custom_type_id)
  CAF_ADD_TYPE_ID(mibyan, (mibyan::tool_request))
  CAF_ADD_TYPE_ID(mibyan, (mibyan::tool_response))
  CAF_ADD_TYPE_ID(mibyan, (mibyan::interrupt_request))
  CAF_ADD_TYPE_ID(mibyan, (std::vector<mibyan::tool_response>))
  CAF_ADD_TYPE_ID(mibyan, (mibyan::exec_cell))
  CAF_ADD_TYPE_ID(mibyan, (mibyan::tool_call))
  CAF_ADD_TYPE_ID(mibyan, (mibyan::chat_message))
  CAF_ADD_TYPE_ID(mibyan, (mibyan::token_usage))
  CAF_ADD_TYPE_ID(mibyan, (mibyan::chat_response))
  CAF_ADD_TYPE_ID(mibyan, (std::vector<mibyan::chat_message>))

  CAF_ADD_TYPE_ID(mibyan, (mibyan::session_meta))
  CAF_ADD_TYPE_ID(mibyan, (mibyan::message_append))
  CAF_ADD_TYPE_ID(mibyan, (mibyan::usage_update))

  // Verbs. In CAF 0.17 atoms are atom_value constants (at most 10 chars)
  // and need no registration.
  CAF_ADD_ATOM(mibyan, mibyan, invoke_atom, "invoke")
  CAF_ADD_ATOM(mibyan, mibyan, done_atom, "done")
  CAF_ADD_ATOM(mibyan, mibyan, interrupt_atom, "interrupt")
  CAF_ADD_ATOM(mibyan, mibyan, tick_atom, "tick")
  CAF_ADD_ATOM(mibyan, mibyan, exec_atom, "exec")
  CAF_ADD_ATOM(mibyan, mibyan, kill_atom, "kill")
  CAF_ADD_ATOM(mibyan, mibyan, reap_atom, "reap")
  CAF_ADD_ATOM(mibyan, mibyan, dispose_atom, "dispose")
  CAF_ADD_ATOM(mibyan, mibyan, stats_atom, "stats")
  CAF_ADD_ATOM(mibyan, mibyan, create_atom, "create")
  CAF_ADD_ATOM(mibyan, mibyan, append_atom, "append")
  CAF_ADD_ATOM(mibyan, mibyan, usage_atom, "usage")
  CAF_ADD_ATOM(mibyan, mibyan, end_atom, "end")
  CAF_ADD_TYPE_ID(mibyan, (mibyan::chat_request))
  CAF_ADD_ATOM(mibyan, mibyan, complete_atom, "complete")
  CAF_ADD_ATOM(mibyan, mibyan, cancel_atom, "cancel")
  CAF_ADD_ATOM(mibyan, mibyan, delta_atom, "delta")
  CAF_ADD_ATOM(mibyan, mibyan, http_head_atom, "http_head")
  CAF_ADD_ATOM(mibyan, mibyan, http_data_atom, "http_data")
  CAF_ADD_ATOM(mibyan, mibyan, http_done_atom, "http_done")
  CAF_ADD_ATOM(mibyan, mibyan, retry_atom, "retry")
  CAF_ADD_ATOM(mibyan, mibyan, stale_atom, "stale")
  CAF_ADD_TYPE_ID(mibyan, (mibyan::turn_request))
  CAF_ADD_ATOM(mibyan, mibyan, turn_atom, "turn")
  // Background deliveries (docs/agent_loop.md, "Background deliveries").
  CAF_ADD_TYPE_ID(mibyan, (mibyan::background_notice))
  CAF_ADD_ATOM(mibyan, mibyan, notice_atom, "notice")
  // The cluster (docs/cluster.md).
  CAF_ADD_TYPE_ID(mibyan, (mibyan::cluster_hello))
  CAF_ADD_TYPE_ID(mibyan, (mibyan::cluster_challenge))
  CAF_ADD_TYPE_ID(mibyan, (mibyan::cluster_proof))
  CAF_ADD_TYPE_ID(mibyan, (mibyan::member_info))
  CAF_ADD_TYPE_ID(mibyan, (std::vector<mibyan::member_info>))
  CAF_ADD_TYPE_ID(mibyan, (mibyan::cluster_welcome))
  CAF_ADD_TYPE_ID(mibyan, (mibyan::cluster_turn))
  CAF_ADD_TYPE_ID(mibyan, (mibyan::cluster_turn_event))
  CAF_ADD_ATOM(mibyan, mibyan, hello_atom, "hello")
  CAF_ADD_ATOM(mibyan, mibyan, auth_atom, "auth")
  CAF_ADD_ATOM(mibyan, mibyan, heartbeat_atom, "heartbeat")
  CAF_ADD_ATOM(mibyan, mibyan, leave_atom, "leave")
  CAF_ADD_ATOM(mibyan, mibyan, members_atom, "members")
  CAF_ADD_ATOM(mibyan, mibyan, work_atom, "work")
  CAF_ADD_ATOM(mibyan, mibyan, tools_atom, "tools")
  CAF_ADD_ATOM(mibyan, mibyan, drain_atom, "drain")
  CAF_ADD_ATOM(mibyan, mibyan, join_atom, "join")
  CAF_ADD_ATOM(mibyan, mibyan, ack_atom, "ack")
  CAF_ADD_ATOM(mibyan, mibyan, in_loop_atom, "inloop")
  CAF_ADD_ATOM(mibyan, mibyan, timer_atom, "timer")
  // The operator console (docs/serve.md, "Operator console").
  CAF_ADD_TYPE_ID(mibyan, (mibyan::kernel_info))
  CAF_ADD_TYPE_ID(mibyan, (std::vector<mibyan::kernel_info>))
  CAF_ADD_ATOM(mibyan, mibyan, kernels_atom, "kernels")
  CAF_ADD_TYPE_ID(mibyan, (mibyan::dashboard_query))
  CAF_ADD_TYPE_ID(mibyan, (mibyan::dashboard_reply))
  CAF_ADD_ATOM(mibyan, mibyan, dashboard_atom, "dashboard")

  // Kernel checkpoints (actors/kernel_checkpoints.hpp, docs/cluster.md).
  CAF_ADD_TYPE_ID(mibyan, (mibyan::kernel_checkpoint))

  // A turn's answer and tool events (mibyan/turn.hpp).
  CAF_ADD_TYPE_ID(mibyan, (mibyan::provider_config))
  CAF_ADD_TYPE_ID(mibyan, (mibyan::tool_event))
  CAF_ADD_TYPE_ID(mibyan, (mibyan::turn_result))
  CAF_ADD_ATOM(mibyan, mibyan, tool_event_atom, "toolevent")
  CAF_ADD_ATOM(mibyan, mibyan, checkpoint_atom, "checkpoint")
  CAF_ADD_ATOM(mibyan, mibyan, restore_atom, "restore")
CAF_END_TYPE_ID_BLOCK(mibyan)
