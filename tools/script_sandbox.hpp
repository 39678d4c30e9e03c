// File: tools/script_sandbox.hpp
//
// How this runtime isolates the code of execute_code scripts: the kernels
// and the `terminal` calls their scripts make run in the same bubblewrap
// sandbox (base/sandbox.hpp) under `code_execution.sandbox`,
// `code_execution.mode` and the `code_execution.max_*` limits.
// docs/security.md states what each mode guarantees and the fallback.
//
// Thread safety: all functions may be called from any thread; the first
// call probes bwrap (blocking, up to 5 s), later calls are cheap.
#pragma once

#include <string>

#include "base/sandbox.hpp"
#include "base/status.hpp"

namespace mibyan {

struct options;
struct subprocess_options;
struct tool_context;

/// Returns the bwrap path scripts run under, or "" for the unsandboxed
/// fallback (`sandbox: off`, or `auto` where bwrap cannot create
/// namespaces; the latter is logged once as a warning). With
/// `sandbox: required` and no working bwrap, fails with unavailable and
/// how to fix it.
result<std::string> script_sandbox_bwrap(const options& cfg);

/// The resource limits of a kernel under `cfg`.
sandbox_limits script_limits(const options& cfg);

/// Rewrites `so` (a shell command of a `terminal` call made by a script)
/// to run under bwrap with the kernel's policy: `ctx.cwd` (the kernel's
/// working directory) writable, Mibyan's state hidden, strict mode without
/// network. Leaves `so` unchanged in the fallback. With `sandbox:
/// required` and no sandbox, fails (unavailable) with the error to report
/// instead of running the command.
status sandbox_script_command(subprocess_options& so,
                              const tool_context& ctx);

} // namespace mibyan
