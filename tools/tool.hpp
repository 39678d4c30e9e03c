// File: tools/tool.hpp
//
// The interface every built-in tool implements. Tools are plain C++: no CAF,
// no actors. The runtime runs `run()` on a blocking-work thread owned by the
// runtime (never a CAF scheduler thread) under a deadline, each call in its
// own invocation actor (actors/tool_invocation.hpp), whether the model or an
// execute_code script made it; a tool that declares itself non-blocking may
// run in that actor's handler instead (a script's: on the I/O thread).
#pragma once

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include "base/json.hpp"

namespace mibyan {

struct options;          // config/options.hpp
class http_client;       // base/http_client.hpp
class redactor;          // base/redact.hpp
class process_registry;  // base/process_registry.hpp
class approval_service;  // approvals/approval_service.hpp
class agent_tool_state;  // tools/agent/agent_tool_state.hpp
class process_launcher;  // kernels/process_launcher.hpp

/// Everything a tool may use besides its arguments. Owned by the caller and
/// valid for the whole `run()` call.
struct tool_context {
  /// The session the call belongs to ("" for none).
  std::string session_id;
  /// The tool call id the model gave, or a generated one.
  std::string call_id;
  /// Working directory for relative paths (absolute, existing).
  std::string cwd;
  /// `$MIBYAN_HOME`, absolute.
  std::string home;
  /// The effective configuration. Never null.
  const options* cfg = nullptr;
  /// Shared HTTP client (one curl-multi thread). Null when the runtime has
  /// no network layer (some unit tests).
  http_client* http = nullptr;
  /// Set by the runtime when the call's deadline passed or the call was
  /// interrupted. Long-running tools poll it and return early. Never null.
  const std::atomic<bool>* cancelled = nullptr;
  /// The point in time after which the result is no longer wanted.
  std::chrono::steady_clock::time_point deadline;
  /// True when the call comes from an execute_code script rather than from
  /// the model directly (the re-read guards apply only to direct calls).
  bool from_script = false;
  /// The runtime's secret redactor (environment + .env values). Null means
  /// process_redactor() (base/redact.hpp).
  const redactor* redact = nullptr;
  /// Background processes of the runtime (terminal background=true and the
  /// process tool). Null when the runtime offers none (unit tests).
  process_registry* processes = nullptr;
  /// The runtime's approval gate for commands (tools/approval_gate.hpp).
  /// Null outside a runtime (unit tests).
  approval_service* approvals = nullptr;
  /// State shared by the agent tools (store, clarify channel, active
  /// skills, todo lists). Null outside a runtime (unit tests).
  agent_tool_state* agent = nullptr;
  /// Starts the tool's commands (terminal, search_files). Null means real
  /// processes (kernels/process_launcher.hpp, launcher_or_real).
  const process_launcher* launcher = nullptr;

  bool is_cancelled() const {
    return cancelled != nullptr && cancelled->load(std::memory_order_relaxed);
  }
};

/// How an execute_code script may call a tool. The script's stub function
/// (`mibyan_tools.<name>`) is generated from the tool's schema() minus
/// `stripped` (kernels/stub_generator.hpp, tools/script_specs.hpp).
struct script_policy {
  /// Whether scripts may call the tool at all.
  bool allowed = false;
  /// Schema properties a script may not pass: they are left out of the stub
  /// and removed from a script's call before validation.
  std::vector<std::string> stripped;
  /// The shape of the result, appended to the stub's docstring and to the
  /// signature execute_code lists (e.g. "{'content', 'total_lines', ...}").
  std::string returns;
};

/// A model-callable tool.
///
/// Contract for implementations:
/// - `run` never throws on bad input; it returns `{"error": "..."}` with a
///   message a model can act on. (An exception that escapes anyway is caught
///   by the dispatcher and turned into `[TOOL_ERROR] ...`.)
/// - Arguments arrive already coerced and type-checked against `schema()`:
///   required members are present and every present member has its declared
///   type (see tools/args.hpp). Unknown members are passed through.
/// - `run` may block (files, subprocesses, HTTP) but must honour
///   `ctx.cancelled` and `ctx.deadline` within about 100 ms.
/// - `run` may be called concurrently from several threads.
class tool {
public:
  virtual ~tool() = default;

  /// The name models call the tool by, e.g. "read_file".
  virtual const char* name() const = 0;

  /// The toolset the tool belongs to ("file", "terminal", "web", ...).
  virtual const char* toolset() const = 0;

  /// A description for the model.
  virtual std::string description() const = 0;

  /// The JSON Schema of the arguments: {"type":"object","properties":...}.
  virtual json::value schema() const = 0;

  /// The wall-clock limit the runtime enforces for one call with `args`
  /// (which have passed validation). Defaults to 60 s.
  virtual std::chrono::milliseconds deadline(const json::value& args,
                                             const options& cfg) const;

  /// Whether two calls may run concurrently with others in one batch of the
  /// agent loop (read-only tools). Defaults to false.
  virtual bool parallel_safe() const { return false; }

  /// Whether `run` is quick (microseconds) and never blocks: no file,
  /// process, network or lock waits, and no approval prompt. An
  /// execute_code script's call of such a tool runs in its invocation
  /// actor's handler on the I/O thread instead of the blocking pool
  /// (docs/execute_code.md, "Script tool calls"). Defaults to false.
  virtual bool non_blocking() const { return false; }

  /// Whether and how execute_code scripts may call the tool. Defaults to
  /// not at all.
  virtual script_policy script() const { return {}; }

  /// Runs the tool. See the class comment for the contract.
  virtual json::value run(const json::value& args,
                          const tool_context& ctx) const = 0;
};

/// Returns `{"error": message}`.
json::value error_result(std::string message);

/// Returns a JSON Schema property `{"type": type, "description": text}`,
/// the building block of every tool's schema().
json::value schema_property(const char* type, std::string description);

/// Returns the schema property of a file `path` argument, shared by the
/// file tools so they describe paths the same way.
json::value path_property();

} // namespace mibyan
