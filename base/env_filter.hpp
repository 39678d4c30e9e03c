// File: base/env_filter.hpp
//
// Decides which environment variables a child process (terminal commands,
// the execute_code kernel) may see. Pure functions over "NAME=value"
// strings: no global state, no I/O besides `current_environment`. The rules
// are described in docs/security.md ("Environment of child processes").
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace mibyan {

/// Returns whether `name` looks like it holds a secret. Its upper-cased form
/// - contains KEY, TOKEN, SECRET, PASSWORD, PASSWD, PASSPHRASE, CREDENTIAL,
///   CREDS, AUTH, DSN, WEBHOOK, BEARER, APIKEY, COOKIE or PRIVATE; or
/// - ends in _PAT, _PASS or _PWD, or contains _PAT_ (personal access
///   tokens: GH_PAT); or
/// - starts with PG and contains PASS (PGPASS, PGPASSFILE), or starts with
///   AWS_SESSION_.
bool is_secret_env_name(std::string_view name);

/// Returns whether `value` looks like a credential whatever its name: a URL
/// with userinfo (`scheme://user:password@host`, `scheme://token@host`), or
/// a well-known token shape (GitHub `ghp_`/`gho_`/`ghu_`/`ghs_`/`ghr_`/
/// `github_pat_`, GitLab `glpat-`, Slack `xox?-`, `sk-`/`sk_live_`/
/// `rk_live_` API keys, AWS access key ids `AKIA`/`ASIA` + 16 upper-case
/// letters or digits, JWTs `eyJ...x.y.z`, PEM private keys).
bool is_secret_env_value(std::string_view value);

/// Returns whether `name` is on the kernel allow-list: it starts with PATH,
/// HOME, USER, LANG, LC_, TERM, TMPDIR, TMP, TEMP, SHELL, LOGNAME, XDG_,
/// PYTHONPATH, VIRTUAL_ENV or CONDA, or is exactly MIBYAN_HOME,
/// MIBYAN_PROFILE, MIBYAN_CONFIG or MIBYAN_ENV. (Secret names are refused
/// before this list is consulted.)
bool is_allowlisted_env_name(std::string_view name);

/// Returns the credential names that can never be passed to children:
/// `<PROVIDER>_API_KEY` for every provider the runtime knows, plus a few
/// provider secrets of other shapes. Sorted; the single place the list
/// lives.
const std::vector<std::string>& provider_credential_names();

/// Returns whether `name` (compared upper-cased) is an LLM provider
/// credential (OPENAI_API_KEY, ANTHROPIC_API_KEY, ...). These never reach children, even when listed
/// in a passthrough list.
bool is_provider_credential(std::string_view name);

/// Returns the entries of `env` ("NAME=value") whose names are not secrets
/// and whose values are not credential-shaped, plus entries listed by exact
/// name in `passthrough` (unless they are provider credentials). Entries
/// without '=' are dropped. Order is preserved. Used for terminal calls the
/// model makes directly.
std::vector<std::string>
filter_environment(const std::vector<std::string>& env,
                   const std::vector<std::string>& passthrough);

/// The kernel's allow-list applied to `env`: an entry is kept when it is
/// listed in `passthrough` (and is no provider credential), or when its
/// name is no secret, is allow-listed and its value is not
/// credential-shaped. Everything else is dropped. Order is preserved. Used
/// for terminal calls made from execute_code scripts, which get the same
/// environment rules as their kernel (kernels/env_scrub.hpp).
std::vector<std::string>
allowlist_environment(const std::vector<std::string>& env,
                      const std::vector<std::string>& passthrough);

/// Returns a copy of the current process environment as "NAME=value"
/// strings. Not synchronised with concurrent setenv() calls (none of which
/// the runtime makes after start-up).
std::vector<std::string> current_environment();

} // namespace mibyan
