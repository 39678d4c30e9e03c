// File: kernels/env_scrub.hpp
//
// Builds the environment of an execute_code kernel from the host's
// environment: secrets and non-allowlisted MIBYAN_* variables are dropped,
// the kernel's private variables are injected. The rules, in order, for each
// inherited variable:
//
//   1. passthrough (exact name)      -> keep; provider credentials
//                                       (is_provider_credential() in
//                                       base/env_filter.hpp) are never
//                                       passed through (refused, reported)
//   2. secret block (is_secret_env_name() in base/env_filter.hpp: the
//      upper-cased name contains KEY, TOKEN, SECRET, PASSWORD, CREDENTIAL,
//      PASSWD, AUTH, DSN, WEBHOOK, CREDS, BEARER, APIKEY, ..., or has a
//      credential shape such as *_PAT, PG*PASS*, AWS_SESSION_*), or a
//      credential-shaped value (is_secret_env_value(): URL userinfo,
//      token formats)                                          -> drop
//   3. safe prefix (PATH, HOME, USER, LANG, LC_, TERM, TMPDIR, TMP, TEMP,
//      SHELL, LOGNAME, XDG_, PYTHONPATH, VIRTUAL_ENV, CONDA)  -> keep
//   4. MIBYAN_HOME, MIBYAN_PROFILE, MIBYAN_CONFIG, MIBYAN_ENV -> keep;
//      every other MIBYAN_* -> drop (listed in `dropped_product`)
//   (3 and 4 are is_allowlisted_env_name() in base/env_filter.hpp, the
//   one copy of the allow-list; script terminal calls use it too.)
//   5. everything else               -> drop
//
// Then the kernel variables are injected (they replace inherited ones of the
// same name). Pure functions: no I/O, no logging, thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace mibyan {

/// Names of the kernel's environment variables.
namespace kernel_env_names {
constexpr const char* rpc_socket = "MIBYAN_RPC_SOCKET";
constexpr const char* rpc_token = "MIBYAN_RPC_TOKEN";
constexpr const char* rpc_timeout = "MIBYAN_RPC_TIMEOUT";
/// Private: read and removed from os.environ by the runner at start-up.
/// The descriptor the runner reads its reply sentinel from (the sentinel
/// itself never appears in an environment: docs/kernel_protocol.md).
constexpr const char* sentinel_fd = "MIBYAN_KERNEL_SENTINEL_FD";
constexpr const char* stub_path = "MIBYAN_KERNEL_STUB";
constexpr const char* watchdog_fd = "MIBYAN_KERNEL_WATCHDOG_FD";
} // namespace kernel_env_names

/// Inputs of build_kernel_env().
struct env_scrub_options {
  /// Exact names passed through although rule 2 would drop them (config
  /// `terminal.env_passthrough` plus skill-registered names).
  std::vector<std::string> passthrough;
  /// Private staging dir (holds the runner and mibyan_tools.py); first on
  /// PYTHONPATH.
  std::string staging_dir;
  /// PYTHONPATH entries owned by the runtime, removed from the user's
  /// PYTHONPATH. Entries whose last component starts with `mibyan_kernel_`
  /// (other kernels' staging dirs) are always removed.
  std::vector<std::string> runtime_paths;
  /// Values injected as MIBYAN_RPC_SOCKET, MIBYAN_RPC_TOKEN,
  /// MIBYAN_KERNEL_STUB (each only when non-empty).
  std::string rpc_socket;
  std::string rpc_token;
  std::string stub_path;
  /// Descriptor number of the sentinel pipe's read end in the child
  /// (MIBYAN_KERNEL_SENTINEL_FD); negative for none.
  int sentinel_fd = -1;
  /// Descriptor number of the watchdog pipe's read end in the child
  /// (MIBYAN_KERNEL_WATCHDOG_FD); negative for none.
  int watchdog_fd = -1;
  /// Seconds the stub waits for a reply (MIBYAN_RPC_TIMEOUT); <= 0 for the
  /// stub's default (300).
  double rpc_timeout = 0;
  /// Value of TZ (the configured timezone); empty for none.
  std::string timezone;
};

/// Result of build_kernel_env().
struct kernel_env {
  /// "NAME=value" entries for execve, inherited ones first (in input
  /// order), then the injected ones.
  std::vector<std::string> env;
  /// Names of inherited variables that were dropped, in input order.
  std::vector<std::string> dropped;
  /// The subset of `dropped` that are MIBYAN_* names (rule 4), for the
  /// one-time debug log pointing at terminal.env_passthrough.
  std::vector<std::string> dropped_product;
  /// Passthrough names refused because they are provider credentials; the
  /// caller warns about each.
  std::vector<std::string> refused_passthrough;
};

/// Returns the kernel environment for `inherited` ("NAME=value" entries;
/// entries without '=' or with an empty name are ignored; for repeated
/// names the first wins, like getenv).
kernel_env build_kernel_env(const std::vector<std::string>& inherited,
                            const env_scrub_options& opts);

} // namespace mibyan
