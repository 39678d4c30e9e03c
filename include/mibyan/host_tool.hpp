// File: include/mibyan/host_tool.hpp  (public API)
//
// A tool the embedding application implements in C++ and offers to the
// model (and, when allowed, to execute_code scripts). Host tools run like
// the built-in tools: on the runtime's blocking-work pool, one call per
// invocation, under the same deadline, output caps and interrupts
// (docs/embedding.md "Host tools").
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace mibyan {

/// What a host tool handler knows about one call. Valid until the handler
/// returns (sync) or until it calls its completion (async).
struct host_tool_call {
  /// The session (agent) the call belongs to.
  std::string session_id;
  /// The call id the model gave (or one the runtime generated).
  std::string call_id;
  /// The working directory of the call (absolute).
  std::string cwd;
  /// True when an execute_code script made the call.
  bool from_script = false;
  /// After this point the result is no longer wanted.
  std::chrono::steady_clock::time_point deadline;
  /// Set when the call is interrupted or its deadline passes. Long
  /// handlers poll `cancelled()` and return early.
  const std::atomic<bool>* cancel_flag = nullptr;

  bool cancelled() const {
    return cancel_flag != nullptr
           && cancel_flag->load(std::memory_order_relaxed);
  }
};

/// The answer of a handler: JSON text. Text that is not JSON is wrapped as
/// {"result": text}. A failure the model should see is {"error": "..."}.
using host_tool_result = std::string;

/// Completion of an asynchronous handler; call it once, from any thread.
/// Calls after the deadline or an interrupt are ignored.
using host_tool_completion = std::function<void(host_tool_result)>;

/// One host tool. Give it a name, a description, a JSON schema and exactly
/// one of `handler` and `async_handler`.
struct host_tool {
  /// The name the model calls it by: 1 to 64 letters, digits, '_' or '-'
  /// (a Python identifier when `allow_in_scripts`). Must not be a built-in
  /// tool's.
  std::string name;
  /// What the tool does, for the model.
  std::string description;
  /// The JSON Schema of the arguments, e.g.
  /// {"type":"object","properties":{"city":{"type":"string"}},
  ///  "required":["city"]}. Arguments are checked against it before the
  /// handler runs.
  std::string schema_json = R"({"type":"object","properties":{}})";
  /// The toolset name (turn and agent options select toolsets).
  std::string toolset = "host";
  /// Synchronous handler: runs on a blocking-work thread of the runtime and
  /// may block; must honour `call.cancelled()`. Exceptions become
  /// {"error": ...} results.
  std::function<host_tool_result(const std::string& args_json,
                                 const host_tool_call& call)>
    handler;
  /// Asynchronous handler: starts the work and returns; the work calls
  /// `done` once when finished (from any thread).
  std::function<void(const std::string& args_json, const host_tool_call& call,
                     host_tool_completion done)>
    async_handler;
  /// Wall-clock limit of one call; the call answers with an error result
  /// after it, and `call.cancelled()` turns true.
  std::chrono::milliseconds timeout{60000};
  /// execute_code scripts may call it (it appears in `mibyan_tools`).
  bool allow_in_scripts = false;
  /// Calls may run concurrently with other read-only calls of one batch.
  bool parallel_safe = false;
  /// The synchronous `handler` is quick (microseconds) and never blocks or
  /// waits: an execute_code script's call may then run it on the kernel's
  /// I/O thread, skipping the blocking-pool hop (docs/execute_code.md,
  /// "Bridge fast path"). Ignored with `async_handler`.
  bool non_blocking = false;
};

} // namespace mibyan
