// File: kernels/interpreter_cache.hpp
//
// Lazy, cached resolution of the kernel interpreter (docs/execute_code.md,
// "Interpreter resolution"). Resolving a wrapper script such as a pyenv
// shim means running it (tens of milliseconds), so the runtime does it only
// when a kernel is about to start, and remembers the answer in
// `<home>/cache/interpreter.json` keyed by a fingerprint of everything that
// selects the version: the name or path asked for, the file it resolves to
// on PATH (path, size, mtime), PYENV_VERSION, PYENV_ROOT, VIRTUAL_ENV,
// CONDA_PREFIX, the pyenv version files (`.python-version` in the working
// directory and its parents, `$PYENV_ROOT/version`), by content. Any change
// gives a new fingerprint and a fresh resolution.
//
// Thread safety: functions are reentrant; concurrent writers of the cache
// file replace it atomically (last one wins). Blocking (stat calls, file
// reads, and at most one run of the wrapper with a 5 s limit): call off
// the scheduler, or where a kernel start (itself blocking) is paid anyway.
#pragma once

#include <string>

namespace mibyan {

/// The fingerprint of what selects the interpreter for `python` (a name
/// on PATH or a path) when started in `cwd` ("" = the process's).
std::string interpreter_fingerprint(const std::string& python,
                                    const std::string& cwd);

/// resolve_interpreter(python) (kernels/kernel_process.hpp), answered from
/// `<home>/cache/interpreter.json` when the fingerprint matches and the
/// cached executable still exists; otherwise resolved and stored. `home`
/// "" disables the file cache. `*from_cache` (optional) tells which.
std::string resolve_interpreter_cached(const std::string& python,
                                       const std::string& home,
                                       const std::string& cwd,
                                       bool* from_cache = nullptr);

/// The interpreter for project mode: the active virtualenv's
/// (VIRTUAL_ENV) or conda env's (CONDA_PREFIX) python when it runs and is
/// >= 3.8 (probed once per fingerprint, cached), else
/// resolve_interpreter_cached(fallback, ...).
std::string resolve_project_interpreter(const std::string& fallback,
                                        const std::string& home,
                                        const std::string& cwd);

} // namespace mibyan
