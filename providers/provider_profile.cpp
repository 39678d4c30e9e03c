#include "providers/provider_profile.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "base/credential_vault.hpp"
#include "base/url_guard.hpp"
#include "base/strings.hpp"

namespace mibyan {

namespace {

std::string trim_slashes(std::string s) {
  while (!s.empty() && (s.back() == '/' || s.back() == ' '))
    s.pop_back();
  return s;
}

std::string host_of(const provider_profile& p) {
  auto v = validate_url(p.default_base_url);
  return v ? v->host : std::string{};
}

// Looks a variable up in the process environment, then in .env. Sets
// `source` to where a plausible value was found. `shadowed` collects names
// whose values were ignored as placeholders.
std::string lookup_key(const std::string& name, const options& opts,
                       std::string& source, std::string& ignored) {
  // The environment, or the copy sealed away from it (credential_vault).
  if (auto env = credential_value(name); !env.empty()) {
    const char* v = env.c_str();
    if (plausible_key(v)) {
      source = "environment variable " + name;
      return v;
    }
    ignored = "the value of " + name + " in the environment looks like a "
              "placeholder and was ignored";
  }
  if (auto i = opts.env_file.find(name); i != opts.env_file.end()
                                         && !i->second.empty()) {
    if (plausible_key(i->second)) {
      source = ".env " + name;
      return i->second;
    }
    ignored = "the value of " + name + " in .env looks like a placeholder "
              "and was ignored";
  }
  return {};
}

std::string env_path(const options& opts) {
  return (opts.home.empty() ? std::string{"$MIBYAN_HOME"} : opts.home)
         + "/.env";
}

} // namespace

const std::vector<provider_profile>& known_providers() {
  static const std::vector<provider_profile> table = {
    {"openai", wire_format::openai, "https://api.openai.com/v1",
     "OPENAI_API_KEY", true, false},
    {"openrouter", wire_format::openai, "https://openrouter.ai/api/v1",
     "OPENROUTER_API_KEY", true, false},
    {"anthropic", wire_format::anthropic, "https://api.anthropic.com/v1",
     "ANTHROPIC_API_KEY", true, false},
    {"deepseek", wire_format::openai, "https://api.deepseek.com/v1",
     "DEEPSEEK_API_KEY", true, false},
    {"ollama", wire_format::openai, "http://127.0.0.1:11434/v1", "", false,
     true},
    {"llamacpp", wire_format::openai, "http://127.0.0.1:8080/v1", "", false,
     true},
    {"lmstudio", wire_format::openai, "http://127.0.0.1:1234/v1", "", false,
     true},
    {"vllm", wire_format::openai, "http://127.0.0.1:8000/v1",
     "VLLM_API_KEY", false, true},
    {"custom", wire_format::openai, "", "CUSTOM_API_KEY", false, true},
  };
  return table;
}

const provider_profile* find_provider(std::string_view name) {
  auto key = strings::lower(name);
  for (auto& p : known_providers())
    if (key == p.name)
      return &p;
  return nullptr;
}

std::string provider_endpoint::request_url() const {
  return base_url
         + (format == wire_format::anthropic ? "/messages"
                                             : "/chat/completions");
}

std::vector<std::pair<std::string, std::string>>
provider_endpoint::headers(bool stream) const {
  std::vector<std::pair<std::string, std::string>> h;
  h.emplace_back("Content-Type", "application/json");
  h.emplace_back("Accept", stream ? "text/event-stream" : "application/json");
  if (format == wire_format::anthropic) {
    if (!api_key.empty())
      h.emplace_back("x-api-key", api_key);
    h.emplace_back("anthropic-version", "2023-06-01");
    auto p = find_provider("anthropic");
    if (p != nullptr && is_default_host(*p, base_url))
      h.emplace_back("anthropic-beta",
                     "interleaved-thinking-2025-05-14,"
                     "fine-grained-tool-streaming-2025-05-14");
  } else if (!api_key.empty()) {
    h.emplace_back("Authorization", "Bearer " + api_key);
  }
  return h;
}

bool is_default_host(const provider_profile& profile,
                     std::string_view base_url) {
  if (*profile.default_base_url == '\0')
    return false;
  auto want = validate_url(profile.default_base_url);
  auto got = validate_url(base_url);
  if (!want || !got)
    return false;
  auto port = [](const url_parts& u) {
    if (!u.port.empty())
      return u.port;
    return std::string{u.scheme == "https" ? "443" : "80"};
  };
  auto host = [](std::string h) {
    if (!h.empty() && h.back() == '.')
      h.pop_back(); // "api.openai.com." is the same host
    return h;
  };
  return got->scheme == want->scheme
         && host(got->host) == host(want->host)
         && port(*got) == port(*want);
}

bool plausible_key(std::string_view value) {
  if (value.size() < 8)
    return false;
  for (char c : value)
    if (std::isspace(static_cast<unsigned char>(c)) || c == '<' || c == '>')
      return false;
  auto v = strings::lower(value);
  for (const char* bad : {"your_api_key", "your-api-key", "yourapikey",
                          "your_key", "your-key", "placeholder", "changeme",
                          "change_me", "replace_me", "replace-me", "xxxx",
                          "api_key_here", "insert_key", "todo"})
    if (v.find(bad) != std::string::npos)
      return false;
  return true;
}

result<provider_endpoint> resolve_endpoint(const endpoint_spec& spec,
                                           const options& opts) {
  auto fail = [](std::string why) {
    return result<provider_endpoint>::failure(status_code::config_invalid,
                                              std::move(why));
  };
  if (spec.provider.empty())
    return fail(no_provider_help());
  auto profile = find_provider(spec.provider);
  if (profile == nullptr) {
    std::string names;
    for (auto& p : known_providers())
      names += (names.empty() ? "" : ", ") + std::string{p.name};
    return fail("Unknown provider '" + spec.provider + "' (known: " + names
                + "). Set model.provider in config.yaml to one of them; any "
                  "other OpenAI-compatible server works as 'custom' with "
                  "model.base_url.");
  }
  provider_endpoint ep;
  ep.provider = profile->name;
  ep.format = profile->format;
  ep.model = spec.model;
  ep.base_url = trim_slashes(spec.base_url.empty() ? profile->default_base_url
                                                   : spec.base_url);
  if (ep.base_url.empty())
    return fail("Provider '" + ep.provider + "' needs a base URL: set "
                "model.base_url in config.yaml (e.g. "
                "http://127.0.0.1:8000/v1 for an OpenAI-compatible server).");
  if (auto v = validate_url(ep.base_url); !v)
    return fail("Invalid base URL '" + ep.base_url + "' for provider '"
                + ep.provider + "': " + v.error);
  // 1. The explicit key goes wherever the user pointed it.
  if (!spec.api_key.empty()) {
    ep.api_key = spec.api_key;
    ep.key_source = "explicit";
    return ep;
  }
  std::string var = profile->key_env;
  bool cloud = !profile->local;
  bool own_host = cloud && is_default_host(*profile, ep.base_url);
  // 2./3. The provider's own variable, environment first, then .env. A
  // cloud key only ever goes to the cloud provider's own host.
  std::string ignored;
  if (!var.empty() && (!cloud || own_host)) {
    ep.api_key = lookup_key(var, opts, ep.key_source, ignored);
    if (!ep.api_key.empty())
      return ep;
  }
  if (!profile->key_required)
    return ep;
  if (cloud && !own_host)
    return fail("Provider '" + ep.provider + "' has base URL " + ep.base_url
                + ", which is not " + host_of(*profile) + ": " + var
                + " is only ever sent to " + host_of(*profile)
                + ". Pass the key for this endpoint explicitly (--api-key), "
                  "or use provider 'custom' with CUSTOM_API_KEY.");
  return fail("No API key for provider '" + ep.provider + "': set " + var
              + " in the environment, or add the line " + var
              + "=<your key> to " + env_path(opts)
              + (ignored.empty() ? "" : " (" + ignored + ")")
              + ", or pass the key explicitly (--api-key).");
}

result<provider_endpoint> resolve_main_endpoint(const options& opts,
                                                const std::string& api_key) {
  return resolve_endpoint({opts.model.provider, opts.model.base_url,
                           opts.model.default_model, api_key},
                          opts);
}

result<provider_endpoint> resolve_fallback_endpoint(const options& opts) {
  if (opts.model.fallback_provider.empty())
    return result<provider_endpoint>::failure(
      status_code::not_found,
      "no fallback provider configured (model.fallback_provider)");
  return resolve_endpoint({opts.model.fallback_provider,
                           opts.model.fallback_base_url,
                           opts.model.fallback_model, {}},
                          opts);
}

std::string no_provider_help() {
  return
    "No model provider is configured. Tell Mibyan which LLM to use with "
    "model.provider and model.default in $MIBYAN_HOME/config.yaml (default "
    "~/.mibyan/config.yaml) and put the key in the environment or in "
    "$MIBYAN_HOME/.env:\n"
    "\n"
    "  OpenAI:      model: {provider: openai, default: gpt-4o-mini}\n"
    "               OPENAI_API_KEY=sk-...\n"
    "  OpenRouter:  model: {provider: openrouter, default: "
    "anthropic/claude-sonnet-4}\n"
    "               OPENROUTER_API_KEY=sk-or-...\n"
    "  Anthropic:   model: {provider: anthropic, default: claude-sonnet-4-5}\n"
    "               ANTHROPIC_API_KEY=sk-ant-...\n"
    "  Ollama:      model: {provider: ollama, default: qwen2.5:7b}\n"
    "               (no key; base URL http://127.0.0.1:11434/v1, change it "
    "with model.base_url)\n"
    "  llama.cpp:   model: {provider: llamacpp, default: local}\n"
    "               (no key; llama-server at http://127.0.0.1:8080/v1)\n"
    "\n"
    "Other providers: deepseek (DEEPSEEK_API_KEY), lmstudio, vllm "
    "(VLLM_API_KEY, optional), custom (model.base_url required, "
    "CUSTOM_API_KEY optional). A key can also be passed with --api-key.";
}

} // namespace mibyan
