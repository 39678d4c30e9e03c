// File: providers/provider_profile.hpp
//
// The providers Mibyan knows (wire format, default base URL, credential
// variable) and the resolution of one configured provider into an
// `provider_endpoint`: base URL, model and API key, ready for the provider
// actor. No CAF, no I/O besides reading the process environment.
//
// Credential order (first match wins): the explicit key (embedding code or
// `--api-key`), the provider's own environment variable, the same name in
// `$MIBYAN_HOME/.env` (`options::env_file`). Placeholder or too-short
// values in the environment or .env are ignored.
//
// Key guard: a key taken from a cloud provider's variable is sent only to
// that provider's default host, compared exactly (scheme https, host, port
// 443): a look-alike host, another provider's host or a custom/local base
// URL never receives it. A custom or local endpoint gets only an explicit
// key or its own variable (CUSTOM_API_KEY, VLLM_API_KEY).
//
// Thread safety: pure functions (they read the environment).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.hpp"
#include "config/options.hpp"
#include "providers/wire_format.hpp"

namespace mibyan {

/// A known provider.
struct provider_profile {
  /// Name used in config (`model.provider`) and in responses.
  const char* name;
  wire_format format;
  /// "" for `custom` (the base URL must be configured).
  const char* default_base_url;
  /// Credential variable ("" = the provider takes no key).
  const char* key_env;
  /// Whether a request without a key is refused before it is sent.
  bool key_required;
  /// A server on this machine or network (no cloud key ever goes there).
  bool local;
};

/// Returns every known provider, in documentation order.
const std::vector<provider_profile>& known_providers();

/// Returns the profile called `name` (ASCII case-insensitive), or nullptr.
const provider_profile* find_provider(std::string_view name);

/// One resolved provider connection. Holds the key: never log it.
struct provider_endpoint {
  /// Profile name ("openai", "custom", ...).
  std::string provider;
  wire_format format = wire_format::openai;
  /// Without a trailing slash, e.g. "https://api.openai.com/v1".
  std::string base_url;
  /// Default model ("" = every request must name one).
  std::string model;
  /// The API key ("" = none is sent).
  std::string api_key;
  /// Where the key came from, for messages: "explicit", "environment
  /// variable OPENAI_API_KEY", ".env OPENAI_API_KEY" or "" (no key).
  std::string key_source;

  /// Returns the URL requests are POSTed to: `/chat/completions` or
  /// `/messages` appended to the base URL.
  std::string request_url() const;

  /// Returns the request headers: content type, accept, and the key as
  /// `Authorization: Bearer` (OpenAI-compatible) or `x-api-key` plus
  /// `anthropic-version` (Anthropic).
  std::vector<std::pair<std::string, std::string>> headers(bool stream) const;
};

/// What to resolve. Empty strings mean "not given".
struct endpoint_spec {
  std::string provider;
  std::string base_url;
  std::string model;
  /// Explicit key (embedding code or `--api-key`).
  std::string api_key;
};

/// Resolves `spec` against the known providers and the credentials
/// visible through `opts` (process environment, then `opts.env_file`).
/// Fails with config_invalid and what is wrong and how to fix it (no or an
/// unknown provider, no or an invalid base URL, no usable key: the message
/// names the variable to set and the .env alternative).
result<provider_endpoint> resolve_endpoint(const endpoint_spec& spec,
                                           const options& opts);

/// Resolves the main provider of `opts.model` (provider, base_url,
/// default) with an optional explicit key.
result<provider_endpoint> resolve_main_endpoint(const options& opts,
                                                const std::string& api_key = {});

/// Resolves the fallback provider of `opts.model` (fallback_provider,
/// fallback_base_url, fallback_model). The explicit key is not passed on:
/// it belongs to the main provider. not_found when no fallback is
/// configured.
result<provider_endpoint> resolve_fallback_endpoint(const options& opts);

/// Returns whether `base_url` is exactly `profile`'s default host: same
/// scheme (https), host (case-insensitive) and port (443 or absent). False
/// for profiles without a default URL.
bool is_default_host(const provider_profile& profile,
                     std::string_view base_url);

/// Returns whether `value` looks like a real key rather than a template
/// placeholder ("your-api-key", "<key>", "changeme", "xxxx...") or a stub
/// shorter than 8 characters.
bool plausible_key(std::string_view value);

/// The message shown when no provider is configured: how to point Mibyan
/// at OpenAI, OpenRouter, Anthropic or a local Ollama / llama.cpp server
/// (config keys and variables).
std::string no_provider_help();

} // namespace mibyan
