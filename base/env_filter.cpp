#include "base/env_filter.hpp"

#include <algorithm>
#include <cctype>

extern char** environ;

namespace mibyan {

namespace {

std::string upper(std::string_view s) {
  std::string result{s};
  for (auto& c : result)
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return result;
}

} // namespace

bool is_secret_env_name(std::string_view name) {
  static const char* const markers[] = {"KEY",        "TOKEN",  "SECRET",
                                        "PASSWORD",   "PASSWD", "AUTH",
                                        "CREDENTIAL"};
  auto u = upper(name);
  return std::any_of(std::begin(markers), std::end(markers),
                     [&](const char* m) {
                       return u.find(m) != std::string::npos;
                     });
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
  return std::binary_search(names.begin(), names.end(), upper(name));
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
    if (is_secret_env_name(name)) {
      bool listed = std::find(passthrough.begin(), passthrough.end(), name)
                    != passthrough.end();
      if (!listed || is_provider_credential(name))
        continue;
    }
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
