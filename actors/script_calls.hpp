// File: actors/script_calls.hpp
//
// The pieces of one tool call that both kinds of invocation actor share
// (actors/tool_invocation.hpp): the call's tool_context, the call prepared
// once (arguments parsed, the tool's script policy applied, its deadline
// and whether it is non-blocking), running it, and the results of a
// deadline and of an interrupt. CAF-free; no state. Thread safety: the
// functions are safe from any thread; a prepared_call belongs to one.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "actors/services.hpp"
#include "messages/tool_request.hpp"
#include "tools/tool.hpp"

namespace mibyan {

/// The tool_context of one call, as the invocation actor and the broker's
/// fast path build it (one source of truth).
tool_context make_call_context(const runtime_services& svc,
                               const tool_request& req,
                               const std::atomic<bool>* cancel,
                               std::chrono::steady_clock::time_point deadline);

/// A call with its arguments parsed once, its tool looked up and its
/// deadline computed (the tool's own, e.g. terminal's timeout). A script's
/// call loses the arguments its tool's script() policy strips (terminal:
/// background, pty, notify...; scripts run foreground commands only).
struct prepared_call {
  tool_request req;
  json::parse_result parsed;
  std::chrono::milliseconds limit{60000};
  /// The tool declares itself non-blocking (tool::non_blocking).
  bool non_blocking = false;
};

prepared_call prepare_call(const runtime_services& svc, tool_request req);

/// Runs a prepared call (validation, the tool, redaction: dispatch_tool)
/// and returns the result JSON text. Blocking unless `non_blocking`.
std::string run_prepared_call(const runtime_services& svc,
                              prepared_call& call,
                              const std::atomic<bool>* cancel,
                              std::chrono::steady_clock::time_point deadline);

/// The result a call gets when its deadline passes after `seconds`.
std::string call_timeout_result(const std::string& tool, int64_t seconds);

/// The result a call gets when it is interrupted for `reason`.
std::string call_cancelled_result(const std::string& reason);

} // namespace mibyan
