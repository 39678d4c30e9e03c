#include "base/env_filter.hpp"

#include <algorithm>
#include <cctype>

#include "base/strings.hpp"

extern char** environ;

namespace mibyan {

namespace {

} // namespace

bool is_secret_env_name(std::string_view name) {
  static const char* const markers[] = {
    "KEY",  "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE",
    "AUTH", "CREDENTIAL", "CREDS", "DSN", "WEBHOOK", "BEARER",
    "APIKEY", "COOKIE", "PRIVATE"};
  auto u = strings::upper(name);
  if (std::any_of(std::begin(markers), std::end(markers),
                  [&](const char* m) {
                    return u.find(m) != std::string::npos;
                  }))
    return true;
  for (const char* suffix : {"_PAT", "_PASS", "_PWD"})
    if (strings::ends_with(u, suffix))
      return true;
  if (u.find("_PAT_") != std::string::npos)
    return true;
  if (strings::starts_with(u, "PG") && u.find("PASS") != std::string::npos)
    return true;
  return strings::starts_with(u, "AWS_SESSION_");
}

bool is_secret_env_value(std::string_view v) {
  // URLs with userinfo: scheme://user:password@host, scheme://token@host.
  for (size_t at = v.find("://"); at != std::string_view::npos;
       at = v.find("://", at + 3)) {
    auto authority = v.substr(at + 3);
    authority = authority.substr(0, authority.find_first_of("/?# \t,;"));
    if (authority.find('@') != std::string_view::npos)
      return true;
  }
  if (v.find("-----BEGIN") != std::string_view::npos
      && v.find("PRIVATE KEY") != std::string_view::npos)
    return true;
  // Token shapes, at the start of the value or of a word in it.
  static const char* const prefixes[] = {
    "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-",
    "xoxb-", "xoxp-", "xoxa-", "xoxs-", "xoxr-", "sk-", "sk_live_",
    "rk_live_", "AKIA", "ASIA", "eyJ"};
  for (size_t i = 0; i < v.size(); ++i) {
    if (i > 0 && std::string_view{" \t,;=:'\""}.find(v[i - 1])
                   == std::string_view::npos)
      continue;
    auto word = v.substr(i);
    word = word.substr(0, word.find_first_of(" \t,;'\""));
    for (const char* p : prefixes) {
      if (!strings::starts_with(word, p))
        continue;
      auto body = word.substr(std::string_view{p}.size());
      if (std::string_view{p} == "AKIA" || std::string_view{p} == "ASIA") {
        if (body.size() == 16
            && std::all_of(body.begin(), body.end(), [](char c) {
                 return std::isupper(static_cast<unsigned char>(c))
                        || std::isdigit(static_cast<unsigned char>(c));
               }))
          return true;
        continue;
      }
      if (std::string_view{p} == "eyJ") {
        if (word.size() >= 30
            && std::count(word.begin(), word.end(), '.') == 2)
          return true;
        continue;
      }
      if (body.size() >= 16
          && std::all_of(body.begin(), body.end(), [](char c) {
               return std::isalnum(static_cast<unsigned char>(c)) || c == '_'
                      || c == '-';
             }))
        return true;
    }
  }
  return false;
}

bool is_allowlisted_env_name(std::string_view name) {
  static const char* const safe_prefixes[] = {
    "PATH",  "HOME",  "USER",  "LANG",   "LC_",     "TERM",
    "TMPDIR", "TMP",  "TEMP",  "SHELL",  "LOGNAME", "XDG_",
    "PYTHONPATH", "VIRTUAL_ENV", "CONDA"};
  static const char* const product_names[] = {
    "MIBYAN_HOME", "MIBYAN_PROFILE", "MIBYAN_CONFIG", "MIBYAN_ENV"};
  for (auto p : safe_prefixes)
    if (strings::starts_with(name, p))
      return true;
  for (auto p : product_names)
    if (name == p)
      return true;
  return false;
}

const std::vector<std::string>& provider_credential_names() {
  // Providers whose `<NAME>_API_KEY` is a credential of the runtime itself.
  static const char* const providers[] = {
    "ANTHROPIC",   "AZURE_OPENAI", "BRAVE",    "CEREBRAS",   "COHERE",
    "CUSTOM",      "DASHSCOPE",    "DEEPSEEK", "EXA",        "FIREWORKS",
    "GEMINI",      "GOOGLE",       "GROQ",     "HUGGINGFACE", "KIMI",
    "MIBYAN",      "MINIMAX",      "MISTRAL",  "MOONSHOT",   "NOUS",
    "NVIDIA",      "OPENAI",       "OPENROUTER", "PERPLEXITY", "TAVILY",
    "TOGETHER",    "XAI",          "ZAI"};
  // Provider secrets that do not follow the `_API_KEY` pattern.
  static const char* const others[] = {"ANTHROPIC_AUTH_TOKEN",
                                       "OPENROUTER_KEY"};
  static const std::vector<std::string> names = [] {
    std::vector<std::string> xs;
    for (auto p : providers)
      xs.push_back(std::string{p} + "_API_KEY");
    for (auto c : others)
      xs.emplace_back(c);
    std::sort(xs.begin(), xs.end());
    return xs;
  }();
  return names;
}

bool is_provider_credential(std::string_view name) {
  auto& names = provider_credential_names();
  return std::binary_search(names.begin(), names.end(), strings::upper(name));
}

std::vector<std::string>
filter_environment(const std::vector<std::string>& env,
                   const std::vector<std::string>& passthrough) {
  std::vector<std::string> result;
  result.reserve(env.size());
  for (auto& entry : env) {
    auto eq = entry.find('=');
    if (eq == std::string::npos || eq == 0)
      continue;
    std::string_view name{entry.data(), eq};
    std::string_view value{entry};
    value.remove_prefix(eq + 1);
    bool listed = std::find(passthrough.begin(), passthrough.end(), name)
                  != passthrough.end();
    if (listed ? is_provider_credential(name)
               : is_secret_env_name(name) || is_secret_env_value(value))
      continue;
    result.push_back(entry);
  }
  return result;
}

std::vector<std::string>
allowlist_environment(const std::vector<std::string>& env,
                      const std::vector<std::string>& passthrough) {
  std::vector<std::string> result;
  for (auto& entry : filter_environment(env, passthrough)) {
    std::string_view name{entry.data(), entry.find('=')};
    bool listed = std::find(passthrough.begin(), passthrough.end(), name)
                  != passthrough.end();
    if (listed || is_allowlisted_env_name(name))
      result.push_back(entry);
  }
  return result;
}

std::vector<std::string> current_environment() {
  std::vector<std::string> result;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e)
    result.emplace_back(*e);
  return result;
}

} // namespace mibyan
